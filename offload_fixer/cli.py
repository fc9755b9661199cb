"""The ``offload-fixer`` command line: thin shells over check / run / explain / fix / lsp / rules.

Heavy modules (JAX, libcst) are imported inside the commands that need them, so
``offload-fixer check`` on a tree without host moves and ``--help`` start fast.
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import click

from offload_fixer import __version__
from offload_fixer.exit_codes import ExitCode
from offload_fixer.model import TARGET_CHOICES, Diagnostic

FORMATS = ("text", "json", "sarif", "github")
STRATEGIES = ("auto", "device", "host")


# ---------------------------------------------------------------------------------------
# Shared options
def _codes(value: str | None, option: str = "--select") -> list[str] | None:
    """Comma-separated codes; a value that names none (``--select ',,,'``) is refused rather
    than read as "not given"."""
    if value is None:
        return None
    codes = [c.strip() for c in value.split(",") if c.strip()]
    if not codes:
        _fail(ExitCode.USAGE, f"{option} {value!r} names no code (e.g. {option} OFL1200,OFL1204)")
    return codes


def output_options(func):
    for option in reversed(
        [
            click.option("--target", type=click.Choice(TARGET_CHOICES), default=None, help="Accelerator to predict for [default: tpu]."),
            click.option("--format", "fmt", type=click.Choice(FORMATS), default=None, help="Output format [default: text]."),
            click.option("--select", default=None, help="Comma-separated codes or prefixes to report (e.g. OFL1200,OFL12)."),
            click.option("--ignore", default=None, help="Comma-separated codes or prefixes to leave out."),
            click.option("--exit-zero", is_flag=True, help="Exit 0 even when diagnostics are found."),
            click.option("-q", "--quiet", is_flag=True, help="Print diagnostics only, no summary or progress."),
            click.option("-v", "--verbose", is_flag=True, help="Also print notes (info) and tool warnings."),
            click.option("--config", type=click.Path(exists=True, dir_okay=False), default=None,
                         help="A pyproject.toml to use instead of the nearest one."),
        ]
    ):
        func = option(func)
    return func


def fix_options(func):
    for option in reversed(
        [
            click.option("--fix", is_flag=True, help="Write the fixes."),
            click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing."),
            click.option("--strategy", type=click.Choice(STRATEGIES), default=None,
                         help="device: move back to device; host: declare host outputs; auto: per origin [default: auto]."),
            click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes labelled unsafe."),
        ]
    ):
        func = option(func)
    return func


@dataclass
class Outcome:
    """What a command found, for rendering and the exit code."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    file_errors: list[Any] = field(default_factory=list)


def _settings(config: str | None, start: str, **overrides: Any):
    from offload_fixer.config import SettingsResolver

    with _config_errors():
        resolver = SettingsResolver(overrides={k: v for k, v in overrides.items() if v is not None}, config=config)
        return resolver, resolver.settings_for(start)


@contextmanager
def _config_errors():
    """A configuration that cannot be used exits 2, a JAX version offload-fixer does not
    model exits 6, whether it came from a flag or from ``pyproject.toml``."""
    from offload_fixer.config import ConfigError, UnsupportedJaxConfig

    try:
        yield
    except UnsupportedJaxConfig as exc:
        _fail(ExitCode.UNSUPPORTED_JAX, str(exc))
    except ConfigError as exc:
        _fail(ExitCode.USAGE, str(exc))


def _settings_for(resolver):
    """``resolver.settings_for`` with its errors turned into exit codes (read per file, lazily)."""
    def settings_for(path: str):
        with _config_errors():
            return resolver.settings_for(path)
    return settings_for


def _fail(code: ExitCode, message: str) -> None:
    click.secho(f"offload-fixer: {message}", err=True, fg="red" if sys.stderr.isatty() else None)
    sys.exit(int(code))


def _emit(outcome: Outcome, settings, fmt: str, quiet: bool, verbose: bool, exit_zero: bool,
          extra_failure: ExitCode | None = None, pending_diff: bool = False, settings_for=None) -> None:
    from offload_fixer.report import render

    kept, unused = _reportable(outcome.diagnostics, settings, settings_for)
    if not verbose and fmt == "text":
        kept = [d for d in kept if d.severity != "info"]
    text = render(
        fmt,
        kept,
        outcome.file_errors,
        unused,
        root=os.getcwd(),
        color=fmt == "text" and sys.stdout.isatty(),
        target=settings.target,
    )
    if quiet and fmt == "text":
        text = "\n".join(line for line in text.splitlines() if not line.startswith(("Found", "All checks")))
    if text:
        click.echo(text)
    if extra_failure is not None:
        sys.exit(int(extra_failure))
    if outcome.file_errors:
        sys.exit(int(ExitCode.INPUT_ERROR))
    found = any(d.severity in ("error", "warning") for d in kept)
    if (found or pending_diff) and not exit_zero:
        sys.exit(int(ExitCode.FINDINGS))
    sys.exit(int(ExitCode.CLEAN))


def _reportable(diagnostics: Sequence[Diagnostic], settings, settings_for=None) -> tuple[list[Diagnostic], list[Any]]:
    """(selected and not suppressed, unused suppressions): what is reported is exactly what
    gets fixed. ``settings_for(path)``: each file's own ``select``/``ignore``."""
    from offload_fixer.config import select_codes
    from offload_fixer.suppression import filter_suppressed

    if settings_for is None:
        selected = select_codes(diagnostics, settings.select, settings.ignore)
    else:
        selected = []
        for d in diagnostics:
            own = settings_for(d.location.path) if d.location and d.location.path else settings
            selected.extend(select_codes([d], own.select, own.ignore))
    kept, _suppressed, unused = filter_suppressed(selected, _sources_for(selected))
    return list(kept), list(unused)


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


def _apply_fixes(diagnostics: Sequence[Diagnostic], strategy: str, write: bool, unsafe: bool,
                 jax_version: str | None, expected_sha256: dict[str, str] | None = None) -> tuple[bool, ExitCode | None]:
    """Plan and apply; returns (changes pending or written, failure exit code if any): 5 when
    a fix is refused (read-only, changed since analysed, would not compile), 4 when the file
    itself cannot be read or compiled."""
    from offload_fixer.fixes import FixError, apply_plans, plan_fixes
    from offload_fixer.recursion import call_allowing_deep_recursion

    from offload_fixer.jax_compat import UnsupportedJaxVersion

    try:
        plans = call_allowing_deep_recursion(plan_fixes, list(diagnostics), strategy, jax_version)
    except UnsupportedJaxVersion as exc:
        _fail(ExitCode.UNSUPPORTED_JAX, str(exc))
    except RecursionError:
        _fail(ExitCode.INPUT_ERROR, "the source is nested too deeply to plan fixes for (Python's recursion limit)")
    if expected_sha256:
        plans = [_with_expected_hash(plan, expected_sha256) for plan in plans]
    failure = None
    changed = False
    for result in apply_plans(plans, write=write, unsafe=unsafe):
        if isinstance(result.error, FixError):
            click.secho(f"{result.path}: fix refused: {result.error}", err=True, fg="red" if sys.stderr.isatty() else None)
            code = _FIX_ERROR_CODES.get(type(result.error).__name__, ExitCode.FIX_REFUSED)
            failure = ExitCode.FIX_REFUSED if ExitCode.FIX_REFUSED in (failure, code) else code
            continue
        for plan, why in result.skipped:
            hint = " (--unsafe-fixes applies it)" if why.startswith("unsafe") else ""
            click.echo(f"{result.path}: not applied ({plan.title}): {why}{hint}", err=True)
        if result.changed:
            changed = True
            if not write:
                click.echo(_colour_diff(result.diff), nl=False)
            else:
                click.echo(f"Fixed {result.path} ({len(result.applied)} fix(es))", err=True)
    return changed, failure


_FIX_ERROR_CODES = {
    "SourceReadError": ExitCode.INPUT_ERROR,
    "SourceEncodingError": ExitCode.INPUT_ERROR,
    "SourceSyntaxError": ExitCode.INPUT_ERROR,
}
"""A fix that fails because the file cannot be read or compiled as it is: an input error, as
``check`` reports it; every other refusal exits 5."""


def _with_expected_hash(plan, expected: dict[str, str]):
    import dataclasses

    digest = expected.get(plan.path) or expected.get(os.path.abspath(plan.path))
    return dataclasses.replace(plan, source_sha256=digest) if digest else plan


def _colour_diff(diff: str) -> str:
    if not sys.stdout.isatty():
        return diff
    colours = {"+": "green", "-": "red", "@": "cyan"}
    out = []
    for line in diff.splitlines(keepends=True):
        colour = None if line.startswith(("+++", "---")) else colours.get(line[:1])
        out.append(click.style(line, fg=colour) if colour else line)
    return "".join(out)


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


class _Commands(click.Group):
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


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version_callback,
              help="Show offload-fixer's version and the JAX version and regime in use.")
def main() -> None:
    """Predict and fix JAX host-offload outputs that XLA rejects with error 1200.

    Every command exits 0 when clean, 1 on findings (or pending --diff changes), 2 on usage
    errors, 3 when the program under `run` failed, 4 on unreadable input, 5 when a fix is
    refused, 6 for a JAX version offload-fixer does not model, 130 when interrupted (Ctrl-C).
    """


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, readable=False))
@output_options
@fix_options
@click.option("--jax-version", default=None, help="Apply the rules of this JAX version [default: installed].")
@click.option("-j", "--jobs", type=int, default=None, help="Parallel processes [default: CPU count].")
@click.option("--exclude", multiple=True, help="Glob of paths to skip (repeatable).")
def check(paths, target, fmt, select, ignore, exit_zero, quiet, verbose, config, fix, diff, strategy, unsafe_fixes,
          jax_version, jobs, exclude) -> None:
    """Static check of Python source: no code is imported or executed."""
    from offload_fixer import jax_compat
    from offload_fixer.report import FileError
    from offload_fixer.static import check_paths

    paths = paths or (".",)
    try:
        if jax_version:
            jax_compat.parse_version(jax_version)
    except jax_compat.UnsupportedJaxVersion as exc:
        _fail(ExitCode.UNSUPPORTED_JAX, str(exc))
    resolver, settings = _settings(config, paths[0], target=target, strategy=strategy, format=fmt, jobs=jobs,
                                   jax_version=jax_version, select=_codes(select, "--select"),
                                   ignore=_codes(ignore, "--ignore"))
    # Each file takes its nearest [tool.offload-fixer] table (its target, JAX version, codes,
    # excludes and strategy), as ruff does; the command line overrides every table.
    settings_for = _settings_for(resolver)
    excludes = list(exclude)
    outcome = Outcome()
    progress = not quiet and sys.stderr.isatty()
    results = check_paths(list(paths), jobs=settings.jobs or os.cpu_count() or 1, excludes=excludes,
                          settings_for=settings_for)
    if progress:
        results = list(click.progressbar(results, label="Checking", file=sys.stderr))
    for result in results:
        if result.parse_error is not None:
            err = result.parse_error
            outcome.file_errors.append(FileError(result.path, err.line, err.col, err.message))
        outcome.diagnostics.extend(result.diagnostics)
    pending = False
    failure = None
    if (fix or diff) and outcome.diagnostics:
        chosen, _unused = _reportable(outcome.diagnostics, settings, settings_for)
        by_settings: dict[tuple[str, str | None], list[Diagnostic]] = {}
        for d in chosen:
            own = settings_for(d.location.path) if d.location and d.location.path else settings
            by_settings.setdefault((own.strategy, own.jax_version), []).append(d)
        for (file_strategy, file_jax), group in by_settings.items():
            group_pending, group_failure = _apply_fixes(group, file_strategy, write=fix and not diff,
                                                        unsafe=unsafe_fixes, jax_version=file_jax)
            pending, failure = pending or group_pending, failure or group_failure
        if fix and not diff:
            # Report what is left after fixing, as ruff does.
            outcome.diagnostics = [d for r in check_paths(list(paths), jobs=1, excludes=excludes,
                                                         settings_for=settings_for)
                                   for d in r.diagnostics]
            pending = False
    _emit(outcome, settings, settings.format if fmt is None else fmt, quiet, verbose, exit_zero, failure,
          pending_diff=diff and pending, settings_for=settings_for)


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-m", "module", is_flag=True, help="Run PROGRAM as a module (python -m).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the diagnostics as JSON for `offload-fixer fix`.")
@output_options
@fix_options
@click.argument("program")
@click.argument("program_args", nargs=-1, type=click.UNPROCESSED)
def run(module, report_path, target, fmt, select, ignore, exit_zero, quiet, verbose, config, fix, diff, strategy,
        unsafe_fixes, program, program_args) -> None:
    """Run PROGRAM unchanged and check every distinct jit compilation it triggers for the target."""
    from offload_fixer import jax_compat
    from offload_fixer.runner import UsageError, run_program, write_report_file

    if not module and not os.path.isfile(program):
        _fail(ExitCode.USAGE, f"no such script: {program}")
    if report_path:
        _check_writable_destination(report_path)
    _, settings = _settings(config, program if not module else ".", target=target, strategy=strategy, format=fmt,
                            select=_codes(select, "--select"), ignore=_codes(ignore, "--ignore"))
    try:
        jax_compat.check_runtime_supported()
    except jax_compat.UnsupportedJaxVersion as exc:
        _fail(ExitCode.UNSUPPORTED_JAX, str(exc))

    def finish(result) -> None:
        """Everything after the program: also run by the runner where the program ends the
        process itself (``os._exit``) or leaves threads that Python waits for."""
        diagnostics = [d for r in result.reports for d in r.diagnostics]
        if verbose:
            for warning in result.tool_warnings:
                click.echo(f"offload-fixer: warning: {warning}", err=True)
        elif result.tool_warnings and not quiet:
            click.echo(f"offload-fixer: {len(result.tool_warnings)} compilation(s) could not be checked "
                       "(--verbose says which and why)", err=True)
        failure = None
        if report_path:
            try:
                write_report_file(report_path, result.reports, settings.target, result.sources, result.texts)
            except OSError as exc:
                click.echo(f"offload-fixer: cannot write the report {report_path}: {exc.strerror or exc}", err=True)
                failure = ExitCode.USAGE
        _save_last_run(None if module else program, result, settings.target, quiet)
        if result.program_exception:
            click.echo(result.program_exception, err=True, nl=False)
        if result.interrupted:
            click.echo("offload-fixer: the program was interrupted (Ctrl-C); findings so far:", err=True)
            failure = ExitCode.INTERRUPTED
        elif result.program_exit_code not in (0, None):
            click.echo(f"offload-fixer: the program exited with status {result.program_exit_code}", err=True)
            failure = ExitCode.PROGRAM_FAILED
        pending = False
        if (fix or diff) and diagnostics:
            # the hashes the runner took when it analysed each file: a file edited since is refused
            pending, fix_failure = _apply_fixes(_reportable(diagnostics, settings)[0], settings.strategy,
                                                write=fix and not diff, unsafe=unsafe_fixes, jax_version=None,
                                                expected_sha256=result.sources)
            failure = failure or fix_failure
        if not quiet:
            click.echo(f"offload-fixer: checked {result.checked} distinct compilation(s) for {settings.target}", err=True)
        _emit(Outcome(diagnostics=diagnostics), settings, fmt or settings.format, quiet, verbose, exit_zero, failure,
              pending_diff=diff and pending)

    try:
        result = run_program(program, list(program_args), target=settings.target, is_module=module, finish=finish)
    except UsageError as exc:
        _fail(ExitCode.USAGE, str(exc))
    if not result.deferred:
        finish(result)


def _check_writable_destination(path: str) -> None:
    """Refuse, before the program runs, a report path whose directory is missing or read-only."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        _fail(ExitCode.USAGE, f"cannot write the report {path}: no directory {directory}")
    if not os.access(directory, os.W_OK | os.X_OK):
        _fail(ExitCode.USAGE, f"cannot write the report {path}: {directory} is not writable")
    if os.path.exists(path) and not os.path.isfile(path):
        _fail(ExitCode.USAGE, f"cannot write the report {path}: not a regular file")


def _save_last_run(program: str | None, result, target: str, quiet: bool) -> None:
    """Every run leaves its findings where the language server looks (:mod:`offload_fixer.last_run`)."""
    from offload_fixer import last_run
    from offload_fixer.runner import write_report_file

    report = last_run.report_path_for(program)
    try:
        last_run.prepare(report)
        write_report_file(str(report), result.reports, target, result.sources, result.texts)
    except OSError as exc:
        if not quiet:
            click.echo(f"offload-fixer: could not save the run for the editor in {report}: {exc}", err=True)


@main.command()
@click.argument("log", default="-")
@click.option("--dump", "dump_dir", type=click.Path(exists=True, file_okay=False, readable=False), default=None,
              help="An --xla_dump_to directory from the failing run.")
@click.option("--target", type=click.Choice(TARGET_CHOICES), default="tpu", show_default=True)
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
def explain(log, dump_dir, target, fmt) -> None:
    """Explain an XLA error-1200 message (a file, or stdin) and map it to source with a dump."""
    import json

    from offload_fixer.explain import explain as explain_log
    from offload_fixer.explain.dump import DumpReadError

    try:
        # A log may be a pipe (``explain <(cmd)``, stdin): read as it comes, bad bytes replaced.
        if log == "-":
            text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
        else:
            with open(log, "rb") as handle:
                text = handle.read().decode("utf-8", errors="replace")
    except OSError as exc:
        _fail(ExitCode.INPUT_ERROR, f"cannot read the log {log}: {exc.strerror or exc}")
    try:
        result = explain_log(text, dump_dir=dump_dir, target=target)
    except DumpReadError as exc:
        _fail(ExitCode.INPUT_ERROR, str(exc))
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        click.echo(result.text)
    if not result.errors:
        sys.exit(int(ExitCode.INPUT_ERROR))
    sys.exit(int(ExitCode.FINDINGS))


@main.command()
@click.argument("report_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing.")
@click.option("--strategy", type=click.Choice(STRATEGIES), default="auto", show_default=True)
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes labelled unsafe.")
def fix(report_file, diff, strategy, unsafe_fixes) -> None:
    """Apply the fixes from a saved `offload-fixer run --report` file."""
    from offload_fixer.runner import read_report_file

    try:
        saved = read_report_file(report_file)
    except OSError as exc:
        _fail(ExitCode.INPUT_ERROR, f"cannot read report {report_file}: {exc.strerror or exc}")
    except ValueError as exc:
        _fail(ExitCode.INPUT_ERROR, f"cannot read report {report_file}: {exc}")
    diagnostics = [d for r in saved.reports for d in r.diagnostics]
    pending, failure = _apply_fixes(diagnostics, strategy, write=not diff, unsafe=unsafe_fixes,
                                    jax_version=saved.jax_version, expected_sha256=saved.sources)
    if failure is not None:
        sys.exit(int(failure))
    sys.exit(int(ExitCode.FINDINGS if diff and pending else ExitCode.CLEAN))


@main.command()
def lsp() -> None:
    """Start the language server on stdio (diagnostics and quick fixes for editors)."""
    from offload_fixer.lsp import main as serve

    serve()


@main.command()
@click.argument("code", required=False)
@click.option("--jax-version", default=None, help="Write the examples for this JAX version.")
def rules(code, jax_version) -> None:
    """List the diagnostic codes, or print the page for CODE."""
    from offload_fixer.rules import UnknownRule, all_rules, render_rule

    if code is None:
        for rule in all_rules():
            click.echo(f"{rule.code}  {rule.name:<32} {rule.summary}")
        return
    try:
        click.echo(render_rule(code, jax_version=jax_version))
    except UnknownRule as exc:
        _fail(ExitCode.USAGE, str(exc.args[0] if exc.args else exc))


if __name__ == "__main__":  # pragma: no cover
    main()
