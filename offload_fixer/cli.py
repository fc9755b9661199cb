"""The ``offload-fixer`` command line: thin shells over check / run / explain / fix / lsp / rules.

Heavy modules (JAX, libcst) are imported inside the commands that need them, so
``offload-fixer check`` on a tree without host moves and ``--help`` start fast.
"""

from __future__ import annotations

import os
import sys
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
def _codes(value: str | None) -> list[str] | None:
    return [c.strip() for c in value.split(",") if c.strip()] if value else None


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
    reports: list[Any] = field(default_factory=list)
    """The analysis reports the diagnostics come from (``run``): their output trees."""


def _settings(config: str | None, start: str, **overrides: Any):
    from offload_fixer.config import ConfigError, SettingsResolver

    try:
        resolver = SettingsResolver(overrides={k: v for k, v in overrides.items() if v is not None}, config=config)
        return resolver, resolver.settings_for(start)
    except ConfigError as exc:
        _fail(ExitCode.USAGE, str(exc))


def _fail(code: ExitCode, message: str) -> None:
    click.secho(f"offload-fixer: {message}", err=True, fg="red" if sys.stderr.isatty() else None)
    sys.exit(int(code))


def _emit(outcome: Outcome, settings, fmt: str, quiet: bool, verbose: bool, exit_zero: bool,
          extra_failure: ExitCode | None = None, pending_diff: bool = False) -> None:
    from offload_fixer.report import render

    kept, unused = _reportable(outcome.diagnostics, settings)
    if not verbose and fmt == "text":
        kept = [d for d in kept if d.severity != "info"]
    kept = _with_planned_fixes(kept, settings, outcome.reports)
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


def _reportable(diagnostics: Sequence[Diagnostic], settings) -> tuple[list[Diagnostic], list[Any]]:
    """(selected and not suppressed, unused suppressions): what is reported is exactly what
    gets fixed."""
    from offload_fixer.config import select_codes
    from offload_fixer.suppression import filter_suppressed

    selected = select_codes(diagnostics, settings.select, settings.ignore)
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


def _with_planned_fixes(diagnostics: list[Diagnostic], settings, reports: Sequence[Any]) -> list[Diagnostic]:
    """Each finding's ``fix (...)`` lines are the edits the planner can make for it (where they
    go, and their safety); one it cannot fix keeps only its advice."""
    from offload_fixer.fixes import FIXABLE_CODES, fix_options, plan_alternatives

    if not any(d.code in FIXABLE_CODES for d in diagnostics):
        return diagnostics
    alternatives = plan_alternatives(diagnostics, settings.strategy, getattr(settings, "jax_version", None),
                                     reports=reports)
    return fix_options(alternatives, diagnostics)


def _apply_fixes(diagnostics: Sequence[Diagnostic], strategy: str, write: bool, unsafe: bool,
                 jax_version: str | None, expected_sha256: dict[str, str] | None = None,
                 reports: Sequence[Any] = ()) -> tuple[bool, ExitCode | None]:
    """Plan and apply; returns (changes pending or written, failure exit code if any)."""
    from offload_fixer.fixes import apply_plans, plan_fixes

    plans = plan_fixes(list(diagnostics), strategy=strategy, jax_version=jax_version, reports=reports)
    if expected_sha256:
        plans = [_with_expected_hash(plan, expected_sha256) for plan in plans]
    failure = None
    changed = False
    for result in apply_plans(plans, write=write, unsafe=unsafe):
        if result.error is not None:
            click.secho(f"{result.path}: fix refused: {result.error}", err=True, fg="red" if sys.stderr.isatty() else None)
            failure = ExitCode.FIX_REFUSED
            continue
        for plan, why in result.skipped:
            click.echo(f"{result.path}: not applied ({plan.title}): {why}", err=True)
        if result.changed:
            changed = True
            if not write:
                click.echo(_colour_diff(result.diff), nl=False)
            else:
                click.echo(f"Fixed {result.path} ({len(result.applied)} fix(es))", err=True)
    return changed, failure


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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version_callback,
              help="Show offload-fixer's version and the JAX version and regime in use.")
def main() -> None:
    """Predict and fix JAX host-offload outputs that XLA rejects with error 1200.

    Every command exits 0 when clean, 1 on findings (or pending --diff changes), 2 on usage
    errors, 3 when the program under `run` failed, 4 on unreadable input, 5 when a fix is
    refused, 6 for a JAX version offload-fixer does not model.
    """


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
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
    _resolver, settings = _settings(config, paths[0], target=target, strategy=strategy, format=fmt, jobs=jobs,
                                   jax_version=jax_version, select=_codes(select), ignore=_codes(ignore))
    excludes = list(settings.exclude) + list(exclude)
    outcome = Outcome()
    progress = not quiet and sys.stderr.isatty()
    # With --fix the files are checked again once fixed: their parsed statements are kept, so
    # that only the statements a fix changed are parsed twice, and their outlines go to the
    # planner (none is kept for a file without findings: nothing there is fixed).
    caches: dict = {}
    results = check_paths(list(paths), target=settings.target, jax_version=settings.jax_version,
                          jobs=settings.jobs or os.cpu_count() or 1, excludes=excludes,
                          caches=caches if fix and not diff else None)
    if progress:
        results = list(click.progressbar(results, label="Checking", file=sys.stderr))
    for result in results:
        if result.parse_error is not None:
            err = result.parse_error
            outcome.file_errors.append(FileError(result.path, err.line, err.col, err.message))
        if not result.diagnostics:
            caches.pop(result.path, None)
        outcome.diagnostics.extend(result.diagnostics)
    pending = False
    failure = None
    if (fix or diff) and outcome.diagnostics:
        from offload_fixer.fixes.excerpt import FileOutline

        for path, cache in caches.items():  # the planner cuts the files into statements no second time
            if cache.outline is not None:
                FileOutline.of(path, cache.outline.text, cache.outline)
        chosen, _unused = _reportable(outcome.diagnostics, settings)
        pending, failure = _apply_fixes(chosen, settings.strategy, write=fix and not diff, unsafe=unsafe_fixes,
                                        jax_version=settings.jax_version)
        if fix and not diff:
            # Report what is left after fixing, as ruff does.
            outcome.diagnostics = [d for r in check_paths(list(paths), target=settings.target,
                                                         jax_version=settings.jax_version, jobs=1, excludes=excludes,
                                                         caches=caches)
                                   for d in r.diagnostics]
            pending = False
    _emit(outcome, settings, settings.format if fmt is None else fmt, quiet, verbose, exit_zero, failure,
          pending_diff=diff and pending)


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
    _, settings = _settings(config, program if not module else ".", target=target, strategy=strategy, format=fmt,
                            select=_codes(select), ignore=_codes(ignore))
    try:
        jax_compat.check_runtime_supported()
    except jax_compat.UnsupportedJaxVersion as exc:
        _fail(ExitCode.UNSUPPORTED_JAX, str(exc))
    try:
        result = run_program(program, list(program_args), target=settings.target, is_module=module)
    except UsageError as exc:
        _fail(ExitCode.USAGE, str(exc))
    diagnostics = [d for r in result.reports for d in r.diagnostics]
    if verbose:
        for warning in result.tool_warnings:
            click.echo(f"offload-fixer: warning: {warning}", err=True)
    elif result.tool_warnings and not quiet:
        click.echo(f"offload-fixer: {len(result.tool_warnings)} compilation(s) could not be checked "
                   "(--verbose says which and why)", err=True)
    if report_path:
        write_report_file(report_path, result.reports, settings.target, result.sources, result.texts)
    _save_last_run(None if module else program, result, settings.target, quiet)
    failure = None
    if result.program_exception:
        click.echo(result.program_exception, err=True, nl=False)
    if result.program_exit_code not in (0, None):
        click.echo(f"offload-fixer: the program exited with status {result.program_exit_code}", err=True)
        failure = ExitCode.PROGRAM_FAILED
    pending = False
    if (fix or diff) and diagnostics:
        # the hashes the runner took when it analysed each file: a file edited since is refused
        pending, fix_failure = _apply_fixes(_reportable(diagnostics, settings)[0], settings.strategy,
                                            write=fix and not diff, unsafe=unsafe_fixes, jax_version=None,
                                            expected_sha256=result.sources, reports=result.reports)
        failure = failure or fix_failure
    if not quiet:
        click.echo(f"offload-fixer: checked {result.checked} distinct compilation(s) for {settings.target}", err=True)
    _emit(Outcome(diagnostics=diagnostics, reports=list(result.reports)), settings, fmt or settings.format, quiet,
          verbose, exit_zero, failure, pending_diff=diff and pending)


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
@click.argument("log", type=click.File("r", encoding="utf-8", errors="replace"), default="-")
@click.option("--dump", "dump_dir", type=click.Path(exists=True, file_okay=False), default=None,
              help="An --xla_dump_to directory from the failing run.")
@click.option("--target", type=click.Choice(TARGET_CHOICES), default="tpu", show_default=True)
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
def explain(log, dump_dir, target, fmt) -> None:
    """Explain an XLA error-1200 message (a file, or stdin) and map it to source with a dump."""
    import json

    from offload_fixer.explain import explain as explain_log

    text = log.read()
    result = explain_log(text, dump_dir=dump_dir, target=target)
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
    except (OSError, ValueError, KeyError) as exc:
        _fail(ExitCode.INPUT_ERROR, f"cannot read report {report_file}: {exc}")
    diagnostics = [d for r in saved.reports for d in r.diagnostics]
    pending, failure = _apply_fixes(diagnostics, strategy, write=not diff, unsafe=unsafe_fixes,
                                    jax_version=saved.jax_version, expected_sha256=saved.sources,
                                    reports=saved.reports)
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
