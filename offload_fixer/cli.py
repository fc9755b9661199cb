"""The ``offload-fixer`` command line: thin shells over check / run / explain / fix / lsp / rules.

Options are declared once, in :data:`OPTIONS`, and each command names the ones it takes, so a
flag means the same thing wherever it appears. The conventions are ruff's (the README has the
table). Heavy modules (JAX, libcst) are imported inside the commands that need them, so
``offload-fixer check`` on a tree without host moves and ``--help`` start fast.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import click

from offload_fixer import __version__, exit_codes
from offload_fixer.console import COLOR_CHOICES, Progress, color_enabled
from offload_fixer.exit_codes import ExitCode
from offload_fixer.model import FORMATS, TARGET_CHOICES, Diagnostic

MACHINE_FORMATS = ("json", "sarif", "github")
STRATEGIES = ("auto", "device", "host")
PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")
"""What ``check`` takes when a file is named (a notebook needs the ``notebook`` extra)."""


# ---------------------------------------------------------------------------------------
# Options: declared once, named by the commands that take them
def _non_empty_codes(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    if value is None:
        return None
    codes = [c.strip() for c in value.split(",") if c.strip()]
    if not codes:
        raise click.BadParameter("names no code (give codes or prefixes such as OFL1200,OFL12)")
    return codes


OPTIONS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "target": click.option(
        "--target", type=click.Choice(TARGET_CHOICES), default=None, help="Accelerator to predict for [default: tpu]."
    ),
    "format": click.option(
        "--format",
        "--output-format",
        "fmt",
        type=click.Choice(FORMATS),
        default=None,
        help="Output format [default: text]; concise is one line per finding.",
    ),
    "output_file": click.option(
        "-o",
        "--output-file",
        type=click.Path(dir_okay=False),
        default=None,
        help="Write the report to this file instead of stdout.",
    ),
    "select": click.option(
        "--select",
        default=None,
        callback=_non_empty_codes,
        help="Comma-separated codes or prefixes to report (e.g. OFL1200,OFL12).",
    ),
    "ignore": click.option(
        "--ignore", default=None, callback=_non_empty_codes, help="Comma-separated codes or prefixes to leave out."
    ),
    "exit_zero": click.option("--exit-zero", is_flag=True, help="Exit 0 even when problems are found."),
    "quiet": click.option(
        "-q", "--quiet", is_flag=True, help="Print the findings only: no summary, notes or progress."
    ),
    "verbose": click.option(
        "-v", "--verbose", is_flag=True, help="Also print notes (info), whole traces and tool warnings."
    ),
    "config": click.option(
        "--config",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help="A pyproject.toml to use instead of the nearest one.",
    ),
    "color": click.option(
        "--color",
        type=click.Choice(COLOR_CHOICES),
        default="auto",
        show_default=True,
        help="Colour the output; auto follows NO_COLOR, FORCE_COLOR and the terminal.",
    ),
    "statistics": click.option(
        "--statistics", is_flag=True, help="Count the findings per code instead of listing them."
    ),
    "show_fixes": click.option(
        "--show-fixes",
        is_flag=True,
        help="With --fix, list what was fixed; without, print the fixes --fix would write.",
    ),
    "fix": click.option("--fix", is_flag=True, help="Write the safe fixes, then report what is left."),
    "diff": click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing."),
    "strategy": click.option(
        "--strategy",
        type=click.Choice(STRATEGIES),
        default=None,
        help="device: move back to device; host: declare host outputs; auto: per origin [default: auto].",
    ),
    "unsafe_fixes": click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes labelled unsafe."),
    "jax_version": click.option(
        "--jax-version", default=None, help="Apply the rules of this JAX version [default: installed]."
    ),
    "jobs": click.option(
        "-j",
        "--jobs",
        type=click.IntRange(min=0),
        default=None,
        help="At most this many processes [default: a pool only for enough source to pay for it].",
    ),
    "exclude": click.option(
        "--exclude", multiple=True, help="Glob of paths to skip, replacing the configured `exclude` (repeatable)."
    ),
    "extend_exclude": click.option(
        "--extend-exclude", multiple=True, help="Glob of paths to skip, added to `exclude` (repeatable)."
    ),
    "force_exclude": click.option(
        "--force-exclude", is_flag=True, help="Apply `exclude` to files named on the command line too (pre-commit)."
    ),
    "confirm": click.option(
        "--confirm",
        is_flag=True,
        help="Also compile with the target's released compiler (libtpu, JAX's CUDA plugin) and say "
        "whether it agrees; with --fix/--diff, only fixes that compile.",
    ),
    "stdin_filename": click.option(
        "--stdin-filename",
        default=None,
        help="The file name of source read from stdin (`-`), for settings and messages.",
    ),
}
REPORT_OPTIONS = (
    "target",
    "format",
    "output_file",
    "select",
    "ignore",
    "exit_zero",
    "quiet",
    "verbose",
    "config",
    "color",
    "statistics",
    "show_fixes",
)
FIX_OPTIONS = ("fix", "diff", "strategy", "unsafe_fixes")


def options(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Attach the named :data:`OPTIONS`, in that order in ``--help``."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for name in reversed(names):
            func = OPTIONS[name](func)
        return func

    return decorate


@dataclass
class Invocation:
    """What the shared options of one command say (``None``: not given)."""

    target: str | None = None
    fmt: str | None = None
    output_file: str | None = None
    select: list[str] | None = None
    ignore: list[str] | None = None
    exit_zero: bool = False
    quiet: bool = False
    verbose: bool = False
    config: str | None = None
    color: str = "auto"
    statistics: bool = False
    show_fixes: bool = False
    fix: bool = False
    diff: bool = False
    strategy: str | None = None
    unsafe_fixes: bool = False
    jax_version: str | None = None
    confirm: bool = False

    @classmethod
    def take(cls, params: dict[str, Any]) -> Invocation:
        """Pop the shared options out of a command's parameters."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{name: params.pop(name) for name in list(params) if name in names})

    @property
    def write(self) -> bool:
        return self.fix and not self.diff


class Console:
    """Where the report goes (stdout, or ``-o FILE``) and the tool's own messages (stderr)."""

    def __init__(self, invocation: Invocation, report_to_stderr: bool = False) -> None:
        self.output_file = invocation.output_file
        self.quiet = invocation.quiet
        self.report_to_stderr = report_to_stderr
        """``check --fix -``: stdout carries the fixed source, so the report goes to stderr."""
        self.color_err = color_enabled(invocation.color, sys.stderr)
        self.color_out = (
            False
            if self.output_file
            else (self.color_err if report_to_stderr else color_enabled(invocation.color, sys.stdout))
        )
        self._report: list[str] = []

    def report(self, text: str) -> None:
        """Part of the report: stdout, or the output file (written once, at the end)."""
        if self.output_file:
            self._report.append(text)
        elif text:
            click.echo(text, nl=False, err=self.report_to_stderr, color=self.color_out)

    def note(self, text: str, always: bool = False) -> None:
        if always or not self.quiet:
            click.echo(text, err=True, color=self.color_err)

    def styled_error(self, text: str) -> str:
        return click.style(text, fg="red") if self.color_err else text

    def flush(self) -> None:
        """Write the output file in one rename, so a reader never sees half a report."""
        if not self.output_file:
            return
        path = os.path.abspath(self.output_file)
        try:
            handle, temporary = tempfile.mkstemp(prefix=".offload-fixer-", dir=os.path.dirname(path))
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write("".join(self._report))
            os.replace(temporary, path)
        except OSError as exc:
            fail(ExitCode.USAGE, f"cannot write the report to {self.output_file}: {exc.strerror or exc}", self)


def fail(code: ExitCode, message: str, console: Console | None = None) -> NoReturn:
    text = f"offload-fixer: error: {message}"
    click.echo(console.styled_error(text) if console else text, err=True, color=console.color_err if console else None)
    sys.exit(int(code))


@dataclass
class Outcome:
    """What a command found, for rendering and the exit code."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    file_errors: list[Any] = field(default_factory=list)
    unused_suppressions: list[Any] = field(default_factory=list)
    checked: str | None = None
    """What was checked, in words, for the summary of a clean run."""
    fixed: int | None = None
    complete: bool = True
    failure: ExitCode | None = None
    """Program failed (3) or fix refused (5): exits with it whatever was found."""
    pending: bool = False
    """``--diff`` has changes to show."""


# ---------------------------------------------------------------------------------------
# Settings and selection
def resolve_settings(invocation: Invocation, start: str, console: Console, **overrides: Any):
    from offload_fixer.config import SettingsResolver

    given = dict(
        target=invocation.target,
        strategy=invocation.strategy,
        jax_version=invocation.jax_version,
        select=invocation.select,
        ignore=invocation.ignore,
        **overrides,
    )
    if invocation.jax_version is not None:
        check_jax_version(invocation.jax_version, console)
    with config_errors(console):
        resolver = CheckedResolver(
            SettingsResolver(overrides={k: v for k, v in given.items() if v is not None}, config=invocation.config),
            console,
        )
    return resolver, resolver.settings_for(start)


@contextlib.contextmanager
def config_errors(console: Console) -> Iterator[None]:
    """A configuration that cannot be used exits 2; a JAX version offload-fixer does not model
    exits 6, whether from the flag or from a ``pyproject.toml``."""
    from offload_fixer.config import ConfigError, UnmodelledJaxVersion

    try:
        yield
    except UnmodelledJaxVersion as exc:
        fail(ExitCode.UNSUPPORTED_JAX, str(exc), console)
    except ConfigError as exc:
        fail(ExitCode.USAGE, str(exc), console)


class CheckedResolver:
    """Each file's settings (its nearest ``[tool.offload-fixer]`` table, read when first asked
    for), a table that cannot be used exiting as :func:`config_errors` says."""

    def __init__(self, resolver: Any, console: Console) -> None:
        self.resolver = resolver
        self.console = console

    def settings_for(self, path: str):
        with config_errors(self.console):
            return self.resolver.settings_for(path)


def check_jax_version(text: str, console: Console) -> None:
    from offload_fixer import jax_compat

    try:
        jax_compat.check_modelled(text)
    except jax_compat.UnsupportedJaxVersion as exc:
        fail(ExitCode.UNSUPPORTED_JAX, str(exc), console)


def reportable(diagnostics: Sequence[Diagnostic], resolver, sources: dict[str, str] | None = None):
    """(selected by each file's settings and not suppressed, unused suppressions): what is
    reported is exactly what gets fixed."""
    from offload_fixer.suppression import filter_suppressed

    selected = []
    for d in diagnostics:
        selected.extend(_settings_of(d, resolver).reportable([d]))
    kept, _suppressed, unused = filter_suppressed(selected, sources if sources is not None else _sources_for(selected))
    return list(kept), list(unused)


def _settings_of(d: Diagnostic, resolver):
    from offload_fixer.report import primary_span

    span = primary_span(d)
    return resolver.settings_for(span.path if span and span.path and os.path.exists(span.path) else ".")


def without_excluded(diagnostics: Sequence[Diagnostic], resolver, console: Console) -> list[Diagnostic]:
    """The findings of ``run`` and ``fix`` outside the files ``exclude`` leaves out (each file
    by its own settings: the engine ``check``'s walk and the language server use); the
    others are counted in a note, never dropped in silence."""
    from offload_fixer.report import primary_span

    kept, excluded = [], set()
    for d in diagnostics:
        span = primary_span(d)
        if span and span.path and os.path.exists(span.path) and _settings_of(d, resolver).is_excluded(span.path):
            excluded.add(span.path)
        else:
            kept.append(d)
    if excluded:
        count = len(diagnostics) - len(kept)
        console.note(
            f"offload-fixer: {count} finding{'s' if count != 1 else ''} in {len(excluded)} excluded "
            f"file{'s' if len(excluded) != 1 else ''} not shown and not fixed (`exclude`)"
        )
    return kept


def _sources_for(diagnostics: Iterable[Diagnostic]) -> dict[str, str]:
    """Source text of every file a diagnostic points into (suppression comments live there;
    a notebook's is its code cells as one program, whose lines the diagnostics count)."""
    from offload_fixer.notebook import NotebookError, read_program_bytes

    sources: dict[str, str] = {}
    for d in diagnostics:
        for span in (d.span, d.origin.span if d.origin else None, d.return_span):
            if span and span.path not in sources and os.path.isfile(span.path):
                try:
                    sources[span.path] = read_program_bytes(span.path).decode("utf-8")
                except (OSError, UnicodeDecodeError, NotebookError):
                    continue
    return sources


# ---------------------------------------------------------------------------------------
# Fixes
@dataclass
class FixRun:
    """What applying (or diffing) the fixes did."""

    results: list[Any]
    resolved: list[Diagnostic]
    """Diagnostics the applied fixes remove."""
    failure: ExitCode | None = None

    @property
    def changed(self) -> bool:
        return any(r.changed and r.error is None for r in self.results)


def apply_fixes(
    diagnostics: Sequence[Diagnostic],
    strategy: str,
    invocation: Invocation,
    jax_version: str | None,
    console: Console,
    expected_sha256: dict[str, str] | None = None,
    source: tuple[str, bytes] | None = None,
    confirm: FixConfirmation | None = None,
    reports: Sequence[Any] = (),
) -> FixRun:
    """Plan, then write (``--fix``) or only compute (``--diff``, stdin) the fixes.
    ``source``: (path, text) read from stdin, fixed in memory. ``confirm``: each fixed file's
    functions are compiled by the released compiler first; a file whose fix XLA rejects is
    left untouched. ``reports``: the analysis reports of ``run``, whose output trees
    host-output fixes mirror."""
    from offload_fixer.findings import resolved_by
    from offload_fixer.fixes import FIXABLE_CODES, apply_plans, plan_fixes
    from offload_fixer.fixes.apply import apply_to_source
    from offload_fixer.jax_compat import UnsupportedJaxVersion
    from offload_fixer.recursion import call_allowing_deep_recursion

    if not any(d.code in FIXABLE_CODES for d in diagnostics):
        return FixRun([], [])
    texts = {source[0]: source[1]} if source else None
    try:
        plans = call_allowing_deep_recursion(
            lambda: plan_fixes(
                list(diagnostics), strategy=strategy, jax_version=jax_version, texts=texts, reports=reports
            )
        )
    except UnsupportedJaxVersion as exc:
        fail(ExitCode.UNSUPPORTED_JAX, str(exc), console)
    except RecursionError:
        fail(
            ExitCode.INPUT_ERROR,
            "the source is nested too deeply to plan fixes for (Python's recursion limit)",
            console,
        )
    if expected_sha256:
        plans = [_with_expected_hash(plan, expected_sha256) for plan in plans]
    if source:
        results = [apply_to_source(source[0], source[1], plans, unsafe=invocation.unsafe_fixes)]
    elif confirm is not None:
        results = confirm.apply(plans, invocation, console)
    else:
        results = apply_plans(plans, write=invocation.write, unsafe=invocation.unsafe_fixes)
    failure = None
    resolved: dict[Diagnostic, None] = {}
    for result in results:
        if result.error is not None:
            why = getattr(result.error, "message", None) or str(result.error)
            console.note(console.styled_error(f"offload-fixer: {result.path}: fix refused: {why}"), always=True)
            code = _FIX_ERROR_CODES.get(type(result.error).__name__, ExitCode.FIX_REFUSED)
            failure = ExitCode.FIX_REFUSED if ExitCode.FIX_REFUSED in (failure, code) else code
            continue
        if invocation.verbose:
            for plan, why in result.skipped:
                hint = " (--unsafe-fixes applies it)" if why.startswith("unsafe") else ""
                console.note(f"offload-fixer: {result.path}: not applied ({plan.title}): {why}{hint}")
        for plan in result.applied:
            resolved.update(dict.fromkeys(resolved_by(plan, diagnostics)))
    return FixRun(results, list(resolved), failure)


_FIX_ERROR_CODES = {
    "SourceReadError": ExitCode.INPUT_ERROR,
    "SourceEncodingError": ExitCode.INPUT_ERROR,
    "SourceSyntaxError": ExitCode.INPUT_ERROR,
}
"""A fix that fails because the file cannot be read or compiled as it is: an input error, as
``check`` reports it; every other refusal exits 5."""


def apply_fixes_per_file(
    diagnostics: Sequence[Diagnostic],
    settings_for: Callable[[str], Any],
    default,
    invocation: Invocation,
    console: Console,
) -> FixRun:
    """:func:`apply_fixes` with each file's own strategy and JAX version (its nearest
    ``[tool.offload-fixer]`` table), one planning per combination."""
    from offload_fixer.report import primary_span

    groups: dict[tuple[str, str | None], list[Diagnostic]] = {}
    for d in diagnostics:
        span = primary_span(d)
        own = settings_for(span.path) if span and span.path and os.path.exists(span.path) else default
        groups.setdefault((own.strategy, own.jax_version), []).append(d)
    combined = FixRun([], [])
    for (strategy, jax_version), group in groups.items():
        run = apply_fixes(group, strategy, invocation, jax_version, console)
        combined.results += run.results
        combined.resolved += run.resolved
        failure = combined.failure, run.failure
        combined.failure = ExitCode.FIX_REFUSED if ExitCode.FIX_REFUSED in failure else (failure[0] or failure[1])
    return combined


class FixConfirmation:
    """``--fix --confirm``: each fixed file's checked functions lowered again from the fixed
    text and compiled before anything is written (:mod:`offload_fixer.xla.fixed`)."""

    def __init__(self, reports: Sequence[Any], calls: dict[int, Any], target: str) -> None:
        self.reports = list(reports)
        self.calls = calls
        self.target = target

    def apply(self, plans: Sequence[Any], invocation: Invocation, console: Console) -> list[Any]:
        from offload_fixer.fixes import apply_plans
        from offload_fixer.xla.fixed import compile_fixed

        planned = apply_plans(plans, write=False, unsafe=invocation.unsafe_fixes)
        confirmed: set[str] = set()
        results = []
        for result in planned:
            if not result.changed or result.error is not None:
                results.append(result)
                continue
            checks = [
                compile_fixed(result.path, result.new_text, report.function, call.args, call.kwargs, self.target)
                for index, report in enumerate(self.reports)
                if (call := self.calls.get(index)) is not None
                and report.function is not None
                and report.function.path
                and os.path.abspath(report.function.path) == os.path.abspath(result.path)
            ]
            refused = [check.reason for check in checks if not check.confirmed]
            if refused or not checks:
                from offload_fixer.fixes.errors import FixNotConfirmedError

                reason = refused[0] if refused else "no checked compilation of this file to compile the fix with"
                results.append(
                    dataclasses.replace(
                        result, error=FixNotConfirmedError(result.path, f"not confirmed by the compiler: {reason}")
                    )
                )
                continue
            compiler = checks[0].verdict.compiler if checks[0].verdict is not None else "the compiler"
            console.note(
                f"offload-fixer: {result.path}: the fix compiles ({compiler} confirmed "
                f"{len(checks)} compilation{'s' if len(checks) != 1 else ''})"
            )
            confirmed.add(result.path)
            results.append(result)
        if invocation.write and confirmed:
            written = {
                r.path: r
                for r in apply_plans(
                    [p for p in plans if p.path in confirmed], write=True, unsafe=invocation.unsafe_fixes
                )
            }
            results = [written.get(r.path, r) for r in results]
        return results


def require_compiler(target: str, console: Console) -> None:
    """``--confirm`` without the target's compiler: a clear refusal with the install command."""
    from offload_fixer import xla

    try:
        xla.oracle(target).spawn()
    except xla.CompilerUnavailable as exc:
        fail(ExitCode.NO_COMPILER, f"--confirm needs the {target} compiler: {exc}", console)


def report_unpredicted(reports: Sequence[Any], console: Console, outcome: Outcome) -> None:
    """A compilation the compiler judges otherwise than the analysis: said in XLA's words, and
    an error of the run."""
    for report in reports:
        for difference in report.unpredicted:
            name = report.function.name if report.function else report.module_name
            console.note(console.styled_error(f"offload-fixer: {name}: {difference}"), always=True)
            outcome.failure = outcome.failure or ExitCode.FINDINGS


def _with_expected_hash(plan, expected: dict[str, str]):
    digest = expected.get(plan.path) or expected.get(os.path.abspath(plan.path))
    return dataclasses.replace(plan, source_sha256=digest) if digest else plan


def colour_diff(diff: str, color: bool) -> str:
    if not color:
        return diff
    colours = {"+": "green", "-": "red", "@": "cyan"}
    out = []
    for line in diff.splitlines(keepends=True):
        colour = None if line.startswith(("+++", "---")) else colours.get(line[:1])
        out.append(click.style(line, fg=colour) if colour else line)
    return "".join(out)


def would_fix_line(count: int) -> str:
    """ruff's closing line for ``--diff``."""
    return f"Would fix {count} problem{'s' if count != 1 else ''}." if count else "No fixes to apply."


def fixed_listing(run: FixRun, diagnostics: Sequence[Diagnostic], root: str) -> str:
    """``--fix --show-fixes``: what was fixed, per file and code, as ruff lists it."""
    from offload_fixer.findings import group_findings
    from offload_fixer.report import display_path, primary_span
    from offload_fixer.rules import UnknownRule, get_rule

    resolved = set(run.resolved)
    found = [f for f in group_findings(diagnostics) if all(d in resolved for d in f.diagnostics)]
    if not found:
        return ""
    per_file: dict[str, dict[str, int]] = {}
    for finding in found:
        span = primary_span(finding.head)
        codes = per_file.setdefault(display_path(span.path, root) if span else "<unknown>", {})
        codes[finding.head.code] = codes.get(finding.head.code, 0) + 1
    lines = [f"Fixed {len(found)} problem{'s' if len(found) != 1 else ''}:"]
    for path, codes in sorted(per_file.items()):
        lines.append(f"- {path}:")
        for code, count in sorted(codes.items()):
            try:
                name = f" ({get_rule(code).name})"
            except UnknownRule:
                name = ""
            lines.append(f"    {count} × {code}{name}")
    return "\n".join(lines) + "\n\n"


# ---------------------------------------------------------------------------------------
# Reporting and the exit status
def finish(
    outcome: Outcome,
    invocation: Invocation,
    settings,
    console: Console,
    marks_for: Callable[[list[Diagnostic]], dict] | None = None,
) -> NoReturn:
    """Print the report (findings, or ``--statistics``; nothing more after ``--diff``'s diffs),
    then exit with the status it earns."""
    from offload_fixer.report import Tally, format_statistics, render

    fmt = invocation.fmt or settings.format
    shown = [d for d in outcome.diagnostics if invocation.verbose or fmt != "text" or d.severity != "info"]
    text_like = fmt in ("text", "concise")
    marks = marks_for(shown) if marks_for and shown and (text_like or invocation.statistics) else {}
    tally = Tally(checked=outcome.checked, fixed=outcome.fixed, complete=outcome.complete, shown=not invocation.quiet)
    if invocation.diff:
        text = ""
    elif invocation.statistics:
        text = format_statistics(shown, "json" if fmt == "json" else "text", outcome.file_errors, marks, tally)
    else:
        text = render(
            fmt,
            shown,
            outcome.file_errors,
            outcome.unused_suppressions,
            root=os.getcwd(),
            color=text_like and console.color_out,
            target=settings.target,
            jax_version=settings.jax_version,
            marks=marks,
            verbose=invocation.verbose,
            tally=tally,
        )
    console.report(text)
    console.flush()
    if outcome.failure is not None:
        sys.exit(int(outcome.failure))
    if outcome.file_errors:
        sys.exit(int(ExitCode.INPUT_ERROR))
    found = not invocation.diff and any(d.severity in ("error", "warning") for d in shown)  # --diff: ruff's "fix only"
    if (found or outcome.pending) and not invocation.exit_zero:
        sys.exit(int(ExitCode.FINDINGS))
    sys.exit(int(ExitCode.CLEAN))


def marks_planner(
    strategy: str,
    invocation: Invocation,
    jax_version: str | None,
    texts: dict[str, bytes] | None = None,
    reports: Sequence[Any] = (),
) -> Callable[[list[Diagnostic]], dict]:
    def marks(diagnostics: list[Diagnostic]) -> dict:
        from offload_fixer.findings import plan_marks
        from offload_fixer.recursion import call_allowing_deep_recursion

        try:
            return call_allowing_deep_recursion(
                lambda: plan_marks(diagnostics, strategy, invocation.unsafe_fixes, jax_version, texts, reports)
            )
        except RecursionError:  # too deep to plan a fix for: the findings are shown without marks
            return {}

    return marks


def show_diff(run: FixRun, console: Console, diagnostics: Sequence[Diagnostic]) -> None:
    """``--diff``: the diffs on stdout, ``Would fix N problems.`` on stderr (ruff's split)."""
    from offload_fixer.findings import group_findings

    for result in run.results:
        if result.changed and result.error is None:
            console.report(colour_diff(result.diff, console.color_out))
    resolved = set(run.resolved)
    count = sum(all(d in resolved for d in f.diagnostics) for f in group_findings(diagnostics))
    console.note(would_fix_line(count))


# ---------------------------------------------------------------------------------------
def _version_callback(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from offload_fixer import jax_compat

    try:
        jax_line = jax_compat.describe_installed()
    except jax_compat.UnsupportedJaxVersion as exc:
        jax_line = f"jax: {exc}"
    click.echo(f"offload-fixer {__version__}\n{jax_line}")
    ctx.exit(0)


class Commands(click.Group):
    """Exit 130 on Ctrl-C (the shell's convention for SIGINT), never click's "Aborted!" with
    status 1, which means "findings"; SIGTERM (143) unwinds the same way, so a temporary file
    of a ``--fix`` in progress is removed and the file left as it was.

    The signal is remembered as well as raised: an exception raised in the middle of a
    library's cleanup can replace the one the signal raised, and the exit status must not
    depend on where the signal landed."""

    def invoke(self, ctx: click.Context) -> Any:
        handled = ctx.protected_args[:1] in (["check"], ["fix"])
        previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
        if handled:
            for number in previous:
                signal.signal(number, _on_signal)
        try:
            outcome = super().invoke(ctx)
        except BaseException as exc:
            if _signalled:
                raise _signal_exit() from None
            if isinstance(exc, KeyboardInterrupt):  # ``run`` and ``lsp`` keep Python's own handler
                raise _signal_exit(int(ExitCode.INTERRUPTED)) from None
            raise
        finally:
            if handled:
                for number, handler in previous.items():
                    signal.signal(number, handler)
        if _signalled:
            raise _signal_exit()
        return outcome


_signalled: list[int] = []
"""The exit status of the first SIGINT/SIGTERM received."""


def _on_signal(signum: int, frame: Any) -> None:
    from offload_fixer.interrupts import defer_if_uninterrupted

    status = int(ExitCode.INTERRUPTED if signum == signal.SIGINT else ExitCode.TERMINATED)
    if not _signalled:
        _signalled.append(status)
    if not defer_if_uninterrupted():  # a file being written in place is finished first
        raise KeyboardInterrupt


def _signal_exit(status: int | None = None) -> click.exceptions.Exit:
    status = status if status is not None else _signalled[0]
    click.echo(f"\noffload-fixer: {'interrupted' if status == ExitCode.INTERRUPTED else 'terminated'}", err=True)
    return click.exceptions.Exit(status)


@click.group(
    cls=Commands,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="\b\nExit codes:\n" + exit_codes.describe(),
)
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_version_callback,
    help="Show offload-fixer's version and the JAX version and regime in use.",
)
def main() -> None:
    """Predict and fix JAX host-offload outputs that XLA rejects with error 1200."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(readable=False))
@options(
    *REPORT_OPTIONS, *FIX_OPTIONS, "jax_version", "jobs", "exclude", "extend_exclude", "force_exclude", "stdin_filename"
)
def check(
    paths: tuple[str, ...],
    jobs: int | None,
    exclude: tuple[str, ...],
    extend_exclude: tuple[str, ...],
    force_exclude: bool,
    stdin_filename: str | None,
    **params: Any,
) -> None:
    """Static check of Python source: no code is imported or executed.

    PATHS are files and directories (default: the current directory); `-` reads source from
    stdin (name it with --stdin-filename). Directories are walked for .py files, skipping
    .gitignore'd and excluded paths.
    """
    invocation = Invocation.take(params)
    console = Console(invocation)
    if "-" in paths or (not paths and stdin_filename):
        if len(paths) > 1:
            fail(ExitCode.USAGE, "`-` (stdin) cannot be combined with other paths", console)
        check_stdin(invocation, console, stdin_filename, force_exclude)
    paths = paths or (".",)
    for path in paths:
        if not os.path.lexists(path):
            fail(ExitCode.INPUT_ERROR, f"{path}: no such file or directory", console)
        if not os.path.isdir(path) and not is_python_file(path):
            fail(
                ExitCode.USAGE,
                f"{path}: not a Python file (checked: {', '.join(PYTHON_SUFFIXES)} files and "
                "scripts with a python #! line); name a directory to walk it",
                console,
            )
    overrides = {"exclude": list(exclude) or None, "extend_exclude": list(extend_exclude) or None, "jobs": jobs}
    resolver, settings = resolve_settings(invocation, paths[0], console, **overrides)
    named = {p for p in paths if not os.path.isdir(p)}
    walked = list(files_to_check(paths, force_exclude, resolver.settings_for))
    files = [item for item in walked if isinstance(item, str)]
    unreadable = [item for item in walked if not isinstance(item, str)]
    # With --fix the files are checked again once fixed: their parsed statements are kept, so
    # that only the statements a fix changed are parsed twice, and their outlines go to the
    # planner (none is kept for a file without findings: nothing there is fixed).
    caches: dict | None = {} if invocation.fix or invocation.diff else None
    outcome = check_files(
        files, named, settings, Progress(not invocation.quiet, delay=0.25), resolver.settings_for, unreadable, caches
    )
    outcome.diagnostics, outcome.unused_suppressions = reportable(outcome.diagnostics, resolver)
    strategy = settings.strategy
    if invocation.fix or invocation.diff:
        share_outlines(caches or {})
        run = apply_fixes_per_file(outcome.diagnostics, resolver.settings_for, settings, invocation, console)
        outcome.failure = run.failure
        if invocation.diff:
            show_diff(run, console, outcome.diagnostics)
            outcome.pending = run.changed
            finish(outcome, invocation, settings, console)
        if run.changed:
            before = len(_findings(outcome.diagnostics))
            if invocation.show_fixes:
                show_fixed(run, outcome.diagnostics, invocation.fmt or settings.format, console)
            # report what is left, as ruff does: the fixed files checked again
            again = check_files(files, named, settings, Progress(False), resolver.settings_for, unreadable, caches)
            outcome.diagnostics, outcome.unused_suppressions = reportable(again.diagnostics, resolver)
            outcome.fixed = max(before - len(_findings(outcome.diagnostics)), 0)
    elif invocation.show_fixes and outcome.diagnostics:
        run = apply_fixes(
            outcome.diagnostics, strategy, dataclasses.replace(invocation, fix=False), settings.jax_version, console
        )
        _show_planned_fixes(run, console)
    finish(outcome, invocation, settings, console, marks_planner(strategy, invocation, settings.jax_version))


def show_fixed(run: FixRun, diagnostics: Sequence[Diagnostic], fmt: str, console: Console) -> None:
    """``--fix --show-fixes``: in the text report, or on stderr beside a machine format."""
    listing = fixed_listing(run, diagnostics, os.getcwd())
    if fmt in ("text", "concise"):
        console.report(listing)
    elif listing:
        console.note(listing.rstrip())


def _findings(diagnostics: Sequence[Diagnostic]) -> list:
    from offload_fixer.findings import group_findings

    return group_findings(d for d in diagnostics if d.severity != "info")


def _show_planned_fixes(run: FixRun, console: Console) -> None:
    """``--show-fixes`` without ``--fix``: the diff ``--fix`` would write, after the findings."""
    diffs = [r.diff for r in run.results if r.changed and r.error is None]
    if diffs:
        console.note(
            "offload-fixer: the fixes --fix would write:\n" + colour_diff("".join(diffs), console.color_err).rstrip()
        )


def is_python_file(path: str) -> bool:
    """A ``.py``/``.pyi`` file, a notebook, or a script whose ``#!`` line names python (what
    pre-commit's ``types: [python]`` passes). Anything but a regular file is left for the
    check to refuse by its type: opening a FIFO to read its first line would never return."""
    if path.endswith(PYTHON_SUFFIXES):
        return True
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return True
        with open(path, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return True  # unreadable: the check reports why
    return first.startswith(b"#!") and b"python" in first


def files_to_check(paths: Sequence[str], force_exclude: bool, settings_for: Callable[[str], Any]) -> Iterable[Any]:
    """The walk of each directory (``.gitignore``; ``exclude`` and ``extend-exclude``, each file
    by its own ``[tool.offload-fixer]`` table and the command line's flags); files named on the
    command line as given, unless ``--force-exclude`` and excluded. A path the walk could not
    use (an unreadable directory, a symlink loop, a FIFO named ``*.py``) comes as an
    ``Unreadable``."""
    from offload_fixer.static.files import walk

    def excluded(path: str) -> bool:
        return settings_for(path).is_excluded(path)

    for path in paths:
        if force_exclude and excluded(path):
            continue
        yield from walk([path], excluded)


def check_files(
    files: Sequence[str],
    named: set[str],
    settings,
    progress: Progress,
    settings_for: Callable[[str], Any] | None = None,
    unreadable: Sequence[Any] = (),
    caches: dict | None = None,
) -> Outcome:
    """The static check of ``files``, each with its own target and JAX version, and a file
    error for each path the walk could not use: nothing is skipped in silence. ``caches``:
    the parsed statements of the files with findings, kept for a second check."""
    from offload_fixer.report import FileError
    from offload_fixer.static import check_paths

    outcome = Outcome(checked=f"{len(files)} file{'s' if len(files) != 1 else ''} checked")
    outcome.file_errors += [FileError(item.path, 1, 1, item.reason) for item in unreadable]
    results = check_paths(
        files,
        target=settings.target,
        jax_version=settings.jax_version,
        jobs=settings.jobs,
        check_syntax=named,
        settings_for=settings_for,
        caches=caches,
    )
    with progress, contextlib.closing(results):
        for done, result in enumerate(results, 1):
            progress.count("Checking", done, len(files))
            if result.parse_error is not None:
                err = result.parse_error
                outcome.file_errors.append(FileError(result.path, err.line, err.col, err.message))
            if caches is not None and not result.diagnostics:
                caches.pop(result.path, None)
            outcome.diagnostics.extend(result.diagnostics)
    return outcome


def share_outlines(caches: dict) -> None:
    """Hand the planner the outlines the check made, so it cuts the files into statements no
    second time."""
    from offload_fixer.fixes.excerpt import FileOutline

    for path, cache in caches.items():
        if cache.outline is not None:
            FileOutline.of(path, cache.outline.text, cache.outline)


def check_stdin(invocation: Invocation, console: Console, stdin_filename: str | None, force_exclude: bool) -> NoReturn:
    """``check -``: the source on stdin; with ``--fix`` the fixed source goes to stdout and the
    report to stderr, as ruff does."""
    from offload_fixer.notebook import is_notebook
    from offload_fixer.report import FileError
    from offload_fixer.static import check_source

    if stdin_filename and is_notebook(stdin_filename):
        fail(ExitCode.USAGE, f"{stdin_filename}: notebooks are not read from stdin; name the .ipynb file", console)
    data = sys.stdin.buffer.read()
    path = stdin_filename or "-"
    resolver, settings = resolve_settings(invocation, stdin_filename or ".", console)
    if invocation.write:
        console = Console(invocation, report_to_stderr=not invocation.output_file)
    if force_exclude and stdin_filename and settings.is_excluded(stdin_filename):
        if invocation.write:
            sys.stdout.buffer.write(data)
        sys.exit(int(ExitCode.CLEAN))
    result = check_source(data, path, target=settings.target, jax_version=settings.jax_version, require_syntax=True)
    outcome = Outcome(checked="stdin")
    if result.parse_error is not None:
        err = result.parse_error
        outcome.file_errors.append(FileError(path, err.line, err.col, err.message))
        if invocation.write:
            sys.stdout.buffer.write(data)
        finish(outcome, invocation, settings, console)
    text = data.decode("utf-8", errors="surrogateescape")
    outcome.diagnostics, outcome.unused_suppressions = reportable(result.diagnostics, resolver, {path: text})
    marks = marks_planner(settings.strategy, invocation, settings.jax_version, {path: data})
    if (invocation.fix or invocation.diff) and outcome.diagnostics:
        run = apply_fixes(
            outcome.diagnostics, settings.strategy, invocation, settings.jax_version, console, source=(path, data)
        )
        fixed = next((r for r in run.results if r.changed and r.error is None), None)
        if invocation.diff:
            show_diff(run, console, outcome.diagnostics)
            outcome.pending = fixed is not None
            finish(outcome, invocation, settings, console)
        new = fixed.new_text.encode("utf-8", errors="surrogateescape") if fixed else data
        sys.stdout.buffer.write(new)
        sys.stdout.flush()
        if fixed is not None:
            before = len(_findings(outcome.diagnostics))
            again = check_source(new, path, target=settings.target, jax_version=settings.jax_version)
            outcome.diagnostics, outcome.unused_suppressions = reportable(
                again.diagnostics, resolver, {path: new.decode("utf-8", errors="surrogateescape")}
            )
            outcome.fixed = max(before - len(_findings(outcome.diagnostics)), 0)
            marks = marks_planner(settings.strategy, invocation, settings.jax_version, {path: new})
    elif invocation.write:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    finish(outcome, invocation, settings, console, marks)


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "-m", "module", is_flag=True, help="Run PROGRAM as a module (python -m), the current directory on sys.path."
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the diagnostics as JSON for `offload-fixer fix`.",
)
@options(*REPORT_OPTIONS, *FIX_OPTIONS, "confirm")
@click.argument("program")
@click.argument("program_args", nargs=-1, type=click.UNPROCESSED)
def run(module: bool, report_path: str | None, program: str, program_args: tuple[str, ...], **params: Any) -> None:
    """Run PROGRAM unchanged and check every distinct jit compilation it triggers for the target.

    The program's own output goes where it always does; with a machine --format and no
    --output-file its stdout goes to stderr, so stdout holds only the report.
    """
    from offload_fixer import jax_compat
    from offload_fixer.runner import ProgramNotFound, find_program, run_program, stdout_to_stderr, write_report_file

    invocation = Invocation.take(params)
    console = Console(invocation)
    try:
        find_program(program, module)
    except ProgramNotFound as exc:
        fail(ExitCode.INPUT_ERROR, str(exc), console)
    if report_path:
        check_writable_destination(report_path, console)
    resolver, settings = resolve_settings(invocation, program if not module else ".", console)
    try:
        jax_compat.check_runtime_supported()
    except jax_compat.UnsupportedJaxVersion as exc:
        fail(ExitCode.UNSUPPORTED_JAX, str(exc), console)
    if invocation.confirm:
        require_compiler(settings.target, console)
    fmt = invocation.fmt or settings.format
    keep_stdout_for_report = fmt in MACHINE_FORMATS and not invocation.output_file and not invocation.diff
    progress = Progress(not invocation.quiet)
    redirect = contextlib.ExitStack()
    if keep_stdout_for_report:
        redirect.enter_context(stdout_to_stderr())

    def after_program(result) -> None:
        """Everything after the program; the runner also calls it where the program ends the
        process itself (``os._exit``) or leaves threads that Python waits for."""
        redirect.close()  # the report goes to stdout again
        sys.stdout.flush()
        checked = f"{result.checked} compilation{'s' if result.checked != 1 else ''} checked for {settings.target}"
        outcome = Outcome(checked=checked)
        found = without_excluded(result.diagnostics, resolver, console)
        outcome.diagnostics, outcome.unused_suppressions = reportable(found, resolver)
        if result.program_exception:
            click.echo(result.program_exception, err=True, nl=False)
        if invocation.verbose:
            for warning in result.tool_warnings:
                console.note(f"offload-fixer: warning: {warning}")
        elif result.tool_warnings:
            console.note(
                f"offload-fixer: {len(result.tool_warnings)} compilation(s) could not be checked "
                "(--verbose says which and why)"
            )
        if invocation.confirm:
            report_unpredicted(result.reports, console, outcome)
        if report_path:
            try:
                write_report_file(
                    report_path, result.reports, settings.target, result.sources, result.texts, calls=result.calls
                )
            except OSError as exc:  # the findings are still shown
                console.note(
                    console.styled_error(
                        f"offload-fixer: error: cannot write the report {report_path}: {exc.strerror or exc}"
                    ),
                    always=True,
                )
                outcome.failure = ExitCode.USAGE
        save_last_run(None if module else program, result, settings.target, console)
        failed = result.program_exit_code not in (0, None)
        console.note(
            f"offload-fixer: checked {result.checked} distinct compilation{'s' if result.checked != 1 else ''} "
            f"({result.intercepted} jit call{'s' if result.intercepted != 1 else ''} intercepted) for "
            f"{settings.target}"
            + (
                f"; the program failed (exit code {result.program_exit_code}), so later compilations were not checked"
                if failed and not result.interrupted
                else ""
            )
        )
        if result.interrupted:
            console.note(
                "offload-fixer: the program was interrupted (Ctrl-C); these are the findings so far", always=True
            )
            outcome.failure = ExitCode.INTERRUPTED
            outcome.complete = False
            outcome.checked = checked + " before the program was interrupted"
        elif failed:
            outcome.failure = outcome.failure or ExitCode.PROGRAM_FAILED
            outcome.complete = False
            outcome.checked = checked + " before the program failed"
        if invocation.fix or invocation.diff:
            # the hashes the runner took when it analysed each file: a file edited since is refused
            run_fixes = apply_fixes(
                outcome.diagnostics,
                settings.strategy,
                invocation,
                None,
                console,
                expected_sha256=result.sources,
                confirm=FixConfirmation(result.reports, result.calls, settings.target) if invocation.confirm else None,
                reports=result.reports,
            )
            outcome.failure = outcome.failure or run_fixes.failure
            if invocation.diff:
                show_diff(run_fixes, console, outcome.diagnostics)
                outcome.pending = run_fixes.changed
                finish(outcome, invocation, settings, console)
            if run_fixes.changed:
                if invocation.show_fixes:
                    show_fixed(run_fixes, outcome.diagnostics, fmt, console)
                before = len(_findings(outcome.diagnostics))
                resolved = set(run_fixes.resolved)
                outcome.diagnostics = [d for d in outcome.diagnostics if d not in resolved]
                outcome.fixed = max(before - len(_findings(outcome.diagnostics)), 0)
                console.note("offload-fixer: run the program again to check the fixed code")
        elif invocation.show_fixes and outcome.diagnostics:
            planned = apply_fixes(
                outcome.diagnostics,
                settings.strategy,
                dataclasses.replace(invocation, fix=False),
                None,
                console,
                expected_sha256=result.sources,
                reports=result.reports,
            )
            _show_planned_fixes(planned, console)
        finish(
            outcome,
            invocation,
            settings,
            console,
            marks_planner(settings.strategy, invocation, None, reports=result.reports),
        )

    try:
        result = run_program(
            program,
            list(program_args),
            target=settings.target,
            is_module=module,
            progress=progress,
            confirm=invocation.confirm,
            finish=after_program,
        )
    except BaseException:
        redirect.close()
        raise
    if not result.deferred:  # else the runner calls it once the program's threads are done
        after_program(result)


def check_writable_destination(path: str, console: Console) -> None:
    """Refuse, before the program runs, a report path whose directory is missing or read-only:
    after the run it would be too late to say so without losing what the run found."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        fail(ExitCode.USAGE, f"cannot write the report {path}: no directory {directory}", console)
    if not os.access(directory, os.W_OK | os.X_OK):
        fail(ExitCode.USAGE, f"cannot write the report {path}: {directory} is not writable", console)
    if os.path.exists(path) and not os.path.isfile(path):
        fail(ExitCode.USAGE, f"cannot write the report {path}: not a regular file", console)


def save_last_run(program: str | None, result, target: str, console: Console) -> None:
    """Every run leaves its findings where the language server looks (:mod:`offload_fixer.last_run`)."""
    from offload_fixer import last_run
    from offload_fixer.runner import write_report_file

    report = last_run.report_path_for(program)
    try:
        last_run.prepare(report)
        write_report_file(str(report), result.reports, target, result.sources, result.texts)
    except OSError as exc:
        console.note(f"offload-fixer: could not save the run for the editor in {report}: {exc.strerror or exc}")


@main.command()
@click.argument("log", type=click.Path(allow_dash=True, readable=False), default="-")
@click.option(
    "--dump",
    "dump_dir",
    type=click.Path(file_okay=False, readable=False),
    default=None,
    help="An --xla_dump_to directory from the failing run.",
)
@options("target", "color", "confirm")
@click.option(
    "--format", "--output-format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True
)
def explain(log: str, dump_dir: str | None, target: str | None, color: str, confirm: bool, fmt: str) -> None:
    """Explain an XLA error-1200 message (a file, or stdin) and map it to source with a dump."""
    import json

    from offload_fixer.explain import DumpReadError
    from offload_fixer.explain import explain as explain_log

    console = Console(Invocation(color=color))
    if dump_dir is not None and not os.path.isdir(dump_dir):
        fail(ExitCode.INPUT_ERROR, f"{dump_dir}: no such dump directory", console)
    try:
        # A log may be a pipe (``explain <(cmd)``, stdin): read as it comes, bad bytes replaced.
        if log == "-":
            text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
        else:
            with open(log, "rb") as handle:
                text = handle.read().decode("utf-8", errors="replace")
    except OSError as exc:
        fail(ExitCode.INPUT_ERROR, f"cannot read the log {log}: {exc.strerror or exc}", console)
    if confirm:
        if dump_dir is None:
            fail(ExitCode.USAGE, "--confirm compiles the dumped modules: give --dump DIR", console)
        require_compiler(target or "tpu", console)
    try:
        result = explain_log(text, dump_dir=dump_dir, target=target or "tpu", confirm=confirm)
    except DumpReadError as exc:
        fail(ExitCode.INPUT_ERROR, str(exc), console)
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        click.echo(result.text)
    if not result.errors:
        sys.exit(int(ExitCode.INPUT_ERROR))
    sys.exit(int(ExitCode.FINDINGS))


@main.command()
@click.argument("report_file", type=click.Path(dir_okay=False, readable=False))
@options("diff", "strategy", "unsafe_fixes", "show_fixes", "quiet", "color", "confirm")
def fix(report_file: str, **params: Any) -> None:
    """Apply the fixes from a saved `offload-fixer run --report` file.

    With --confirm (the report written by `run --confirm --report`), each fixed function is
    compiled by the released compiler first, with the arguments the run recorded."""
    from offload_fixer.runner import AbstractCall, decode_call, read_report_file

    invocation = Invocation.take(params)
    invocation.fix = True
    console = Console(invocation)
    try:
        saved = read_report_file(report_file)
    except FileNotFoundError:
        fail(ExitCode.INPUT_ERROR, f"{report_file}: no such report", console)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        fail(ExitCode.INPUT_ERROR, f"cannot read the report {report_file}: {exc}", console)
    resolver, _ = resolve_settings(invocation, ".", console)
    diagnostics = without_excluded([d for r in saved.reports for d in r.diagnostics], resolver, console)
    confirmation = None
    if invocation.confirm:
        require_compiler(saved.target, console)
        calls = {index: AbstractCall(None, *decode_call(call)) for index, call in saved.calls.items()}
        confirmation = FixConfirmation(saved.reports, calls, saved.target)
    run_fixes = apply_fixes(
        diagnostics,
        invocation.strategy or "auto",
        invocation,
        saved.jax_version,
        console,
        expected_sha256=saved.sources,
        confirm=confirmation,
        reports=saved.reports,
    )
    if invocation.diff:
        show_diff(run_fixes, console, diagnostics)
    elif invocation.show_fixes:
        console.report(fixed_listing(run_fixes, diagnostics, os.getcwd()))
    if not invocation.diff:
        count = len(_findings(run_fixes.resolved))
        console.note(f"Fixed {count} problem{'s' if count != 1 else ''}." if count else "No fixes applied.")
    if run_fixes.failure is not None:
        sys.exit(int(run_fixes.failure))
    sys.exit(int(ExitCode.FINDINGS if invocation.diff and run_fixes.changed else ExitCode.CLEAN))


@main.command()
def doctor() -> None:
    """Which JAX, jaxlib and compilers are installed, what --confirm can check, and which
    compilers the analysis was checked against."""
    from offload_fixer.xla.doctor import report_lines

    click.echo("\n".join(report_lines()))


@main.command()
def lsp() -> None:
    """Start the language server on stdio (diagnostics and quick fixes for editors)."""
    from offload_fixer.lsp import main as serve

    serve()


@main.command()
@click.argument("code", required=False)
@options("jax_version")
def rules(code: str | None, jax_version: str | None) -> None:
    """List the diagnostic codes, or print the page for CODE."""
    from offload_fixer.rules import UnknownRule, all_rules, render_rule

    console = Console(Invocation())
    if jax_version is not None:
        check_jax_version(jax_version, console)
    if code is None:
        width = max(len(rule.name) for rule in all_rules())
        for rule in all_rules():
            click.echo(f"{rule.code}  {rule.name:<{width}}  {rule.summary}")
        return
    try:
        click.echo(render_rule(code, jax_version=jax_version))
    except UnknownRule as exc:
        fail(ExitCode.USAGE, str(exc.args[0] if exc.args else exc), console)


if __name__ == "__main__":  # pragma: no cover
    main()
