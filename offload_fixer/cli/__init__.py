"""The ``offload-fixer`` command line: thin shells over check / run / explain / fix / lsp / rules.

Options are declared once, in :data:`OPTIONS`, and each command names the ones it takes, so a
flag means the same thing wherever it appears. The conventions are ruff's (the README has the
table). Heavy modules (JAX, libcst) are imported inside the commands that need them, so
``offload-fixer check`` on a tree without host moves and ``--help`` start fast.

The commands are here; what they share is beside them: :mod:`.options` (the options and one
invocation's console and outcome), :mod:`.settings` (settings and which findings are
reported), :mod:`.checking` (what ``check`` reads), :mod:`.fixing` (``--fix``, ``--diff``,
``--confirm``) and :mod:`.reporting` (the report, the summary and the exit status).

Over 500 lines on purpose: the click commands and their options, one decorator stack each;
what they share is in the modules named above.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import click

from offload_fixer import exit_codes
from offload_fixer.cli import process
from offload_fixer.cli.checking import (
    check_files,
    check_stdin,
    files_to_check,
    grouped_findings,
    io_errors_as_file_errors,
    is_python_file,
    missing_path,
    result_cache,
    share_outlines,
    show_fixed,
    show_planned_fixes,
)
from offload_fixer.cli.confirming import report_compiled, report_unpredicted, require_compiler, saved_calls
from offload_fixer.cli.fixing import (
    apply_fixes,
    apply_fixes_per_file,
    fix_in_memory_then_write,
    fixed_listing,
    marks_after_fixing,
    shown_path,
    verify_fixes,
)
from offload_fixer.cli.options import (
    FIX_OPTIONS,
    MACHINE_FORMATS,
    PYTHON_SUFFIXES,
    REPORT_OPTIONS,
    Console,
    Invocation,
    Outcome,
    fail,
    options,
)
from offload_fixer.cli.reporting import finish, marks_planner, show_diff, warn_unread_paths
from offload_fixer.cli.settings import check_jax_version, reportable, resolve_settings, without_excluded
from offload_fixer.codes import IO_ERROR
from offload_fixer.console import Progress
from offload_fixer.exit_codes import ExitCode
from offload_fixer.resolved_paths import PathChangedError, resolve
from offload_fixer.version import __version__


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

    ALIASES: ClassVar[dict[str, str]] = {"rule": "rules"}
    """ruff's spelling of a command, taken for ours (``offload-fixer rule OFL1200``)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, self.ALIASES.get(cmd_name, cmd_name))

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


REPORT_WITHOUT_HASHES = (
    "the report holds no sha256 of the files it analysed ('sources'), so a fix cannot tell them from files "
    "changed since; run `offload-fixer run --report` again. Nothing was written"
)

MAX_FIX_ROUNDS = 4
"""Checks after a ``check --fix`` at most: one fix can uncover the next finding (ruff loops too)."""


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


def entry() -> None:
    """The ``offload-fixer`` command as a process of its own (:mod:`.process`)."""
    process.run_as_process(lambda: main(prog_name="offload-fixer"))


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(readable=False))
@options(
    *REPORT_OPTIONS,
    *FIX_OPTIONS,
    "fix_only",
    "exit_non_zero_on_fix",
    "jax_version",
    "target_version",
    "jobs",
    "no_cache",
    "exclude",
    "extend_exclude",
    "force_exclude",
    "stdin_filename",
    "show_settings",
    "show_files",
    "add_noqa",
    "watch",
)
def check(
    paths: tuple[str, ...],
    jobs: int | None,
    no_cache: bool,
    target_version: str | None,
    exclude: tuple[str, ...],
    extend_exclude: tuple[str, ...],
    force_exclude: bool,
    stdin_filename: str | None,
    show_settings: bool,
    show_files: bool,
    add_noqa: bool,
    watch: bool,
    **params: Any,
) -> None:
    """Static check of Python source: no code is imported or executed.

    PATHS are files and directories (default: the current directory); `-` reads source from
    stdin (name it with --stdin-filename). Directories are walked for .py files, skipping
    .gitignore'd and excluded paths.
    """
    from offload_fixer.batch_gc import tune_for_batch, tuned_for_batch

    if process.own_process():  # the collector is the process's to keep; no teardown after it
        tune_for_batch()
        process.end_without_teardown()
    else:
        click.get_current_context().with_resource(tuned_for_batch())
    invocation = Invocation.take(params)
    console = Console(invocation)
    if invocation.exit_zero and invocation.exit_non_zero_on_fix:
        fail(ExitCode.USAGE, "--exit-zero cannot be used with --exit-non-zero-on-fix", console)
    if "-" in paths or (not paths and stdin_filename):
        if len(paths) > 1:
            fail(ExitCode.USAGE, "`-` (stdin) cannot be combined with other paths", console)
        check_stdin(invocation, console, stdin_filename, force_exclude)
    paths = paths or (".",)
    missing = [path for path in paths if not os.path.lexists(path)]  # a finding each, as ruff's E902
    for path in paths:
        if path not in missing and not os.path.isdir(path) and not is_python_file(path):
            fail(
                ExitCode.USAGE,
                f"{path}: not a Python file (checked: {', '.join(PYTHON_SUFFIXES)} files and "
                "scripts with a python #! line); name a directory to walk it",
                console,
            )
    overrides = {
        "exclude": list(exclude) or None,
        "extend_exclude": list(extend_exclude) or None,
        "jobs": jobs,
        "target_version": target_version,
    }
    resolver, settings = resolve_settings(invocation, paths[0], console, snapshot=not watch, **overrides)
    if show_settings:
        from offload_fixer.cli.inspecting import show_settings as print_settings

        print_settings(paths[0], settings)
        sys.exit(int(ExitCode.CLEAN))
    named = {p for p in paths if not os.path.isdir(p)}
    walked = list(files_to_check([p for p in paths if p not in missing], force_exclude, resolver.is_excluded))
    walked += [missing_path(path) for path in missing if not (force_exclude and resolver.is_excluded(path))]
    files = [item for item in walked if isinstance(item, str)]
    unreadable = [item for item in walked if not isinstance(item, str)]
    if show_files:
        from offload_fixer.cli.inspecting import show_files as print_files

        print_files(files)
        sys.exit(int(ExitCode.CLEAN))
    if watch:
        from offload_fixer.cli.watch import watch as watch_files

        argv = [arg for arg in sys.argv[sys.argv.index("check") + 1 :] if arg not in ("-w", "--watch")]
        watch_files(
            argv,
            paths,
            lambda: [f for f in files_to_check(paths, force_exclude, resolver.is_excluded) if isinstance(f, str)],
        )
    # With --fix the files are checked again once fixed: their parsed statements are kept, so
    # that only the statements a fix changed are parsed twice, and their outlines go to the
    # planner (none is kept for a file without findings: nothing there is fixed).
    caches: dict | None = {} if invocation.fix or invocation.diff else None
    results = None if no_cache else result_cache(settings)
    outcome = check_files(
        files,
        named,
        settings,
        Progress(not invocation.quiet, delay=0.25),
        resolver.settings_for,
        unreadable,
        caches,
        results,
    )
    if results is not None and results.refusal:
        console.note_once(f"offload-fixer: warning: the result cache {results.refusal}")
    if invocation.verbose and outcome.analysed:
        console.note(outcome.analysed)
    found = outcome.diagnostics
    outcome.diagnostics, outcome.unused_suppressions = reportable(found, resolver)
    warn_unread_paths(found, outcome.diagnostics, console)
    strategy = settings.strategy
    if add_noqa:
        from offload_fixer.cli.add_noqa import write_noqa

        outcome.file_errors += io_errors_as_file_errors(outcome.diagnostics)  # no line to put a directive on
        noted = [d for d in outcome.diagnostics if d.severity != "info" and d.code != IO_ERROR]
        added = write_noqa(noted, console, outcome.file_errors, write_scope(paths, named))
        if added:
            console.note(f"Added {added} noqa directive{'s' if added != 1 else ''}.")
        sys.exit(int(ExitCode.INPUT_ERROR if outcome.file_errors else ExitCode.CLEAN))
    run = None
    if invocation.fix or invocation.diff:
        scope = write_scope(paths, named)
        share_outlines(caches or {})
        if invocation.diff:
            run = apply_fixes_per_file(
                outcome.diagnostics, resolver.settings_for, settings, invocation, console, scope=scope
            )
            outcome.failure = run.failure
            show_diff(run, console, outcome.diagnostics)
            outcome.pending = run.changed
            finish(outcome, invocation, settings, console)

        def check_again(texts: dict[str, bytes]) -> list:
            """The files checked again as fixed in memory (their statements parsed once more
            only where a fix changed them)."""
            again = check_files(
                files, named, settings, Progress(False), resolver.settings_for, unreadable, caches, texts=texts
            )
            share_outlines(caches or {})
            found, outcome.unused_suppressions = reportable(again.diagnostics, resolver, texts=texts)
            return found

        before = len(grouped_findings(outcome.diagnostics))
        run, outcome.diagnostics, found = fix_in_memory_then_write(
            outcome.diagnostics,
            check_again,
            resolver.settings_for,
            settings,
            invocation,
            console,
            scope,
            MAX_FIX_ROUNDS,
        )
        outcome.failure = run.failure
        if run.changed:
            outcome.written = True
            outcome.fixed = max(before - len(grouped_findings(outcome.diagnostics)), 0)
            if invocation.show_fixes:
                show_fixed(run, found, invocation.fmt or settings.format, console)
    elif invocation.show_fixes and outcome.diagnostics:
        run = apply_fixes(
            outcome.diagnostics, strategy, dataclasses.replace(invocation, fix=False), settings.jax_version, console
        )
        show_planned_fixes(run, console)
    marks = marks_planner(strategy, invocation, settings.jax_version, results=results)
    if invocation.fix and run is not None:  # a fix refused before it was written is not [*]
        marks = marks_after_fixing(marks, run)
    finish(outcome, invocation, settings, console, marks)


def write_scope(paths: Sequence[str], named: Iterable[str]) -> Any:
    """Where ``check`` may write a fix or a noqa: inside the project, the trees named and the
    files named (:class:`~offload_fixer.fixes.scope.WriteScope`)."""
    from offload_fixer.fixes.scope import WriteScope, project_root

    return WriteScope.of([project_root(os.getcwd()), *(p for p in paths if os.path.isdir(p))], named)


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
@click.option(
    "--keep-going/--no-keep-going",
    default=True,
    show_default=True,
    help="On an accelerator: go on past a compilation that fails (compiled without its offload), or stop at the first.",
)
@options(*REPORT_OPTIONS, *FIX_OPTIONS, "confirm", "topology", "num_slices", "no_cache")
@click.argument("program")
@click.argument("program_args", nargs=-1, type=click.UNPROCESSED)
def run(
    module: bool,
    report_path: str | None,
    keep_going: bool,
    program: str,
    program_args: tuple[str, ...],
    topology: str | None,
    num_slices: int | None,
    no_cache: bool,
    **params: Any,
) -> None:
    """Run PROGRAM unchanged and check every distinct jit compilation it triggers for the target.

    The program's own output goes where it always does; with a machine --format and no
    --output-file its stdout goes to stderr, so stdout holds only the report.

    On a TPU or GPU machine each compilation is checked before it compiles; one that fails is
    reported in place of JAX's traceback (-v shows it) and compiled without its offload so that
    the program goes on, and --fix runs the fixed program again there.

    With --topology the program sees that TPU pod's devices and compiles for them from this
    machine; what needs the pod's chips to run stops it there.
    """
    from offload_fixer import jax_compat
    from offload_fixer.jax_compat.pod import PodUnavailable
    from offload_fixer.model import position_text
    from offload_fixer.processes import GATHER_TIMEOUT_S
    from offload_fixer.report.places import display_path
    from offload_fixer.report_file import write_report_file
    from offload_fixer.runner import ProgramNotFound, find_program, run_program, stdout_to_stderr
    from offload_fixer.verdicts import VerdictCache

    invocation = Invocation.take(params)
    console = Console(invocation)
    try:
        find_program(program, module)
    except ProgramNotFound as exc:
        fail(ExitCode.INPUT_ERROR, str(exc), console)
    report_directory = check_writable_destination(report_path, console) if report_path else None
    resolver, settings = resolve_settings(invocation, program if not module else ".", console)
    try:
        jax_compat.check_runtime_supported()
    except jax_compat.UnsupportedJaxVersion as exc:
        fail(ExitCode.UNSUPPORTED_JAX, str(exc), console)
    pod = pod_topology(topology, num_slices, settings.target, console)
    from offload_fixer.cli.on_accelerator import accelerator_run

    # a pod named: the program sees its compile-only devices, whatever this machine holds
    on_accelerator = (
        None
        if pod is not None
        else accelerator_run(
            invocation, settings.target, keep_going, console, measure=invocation.fix and not invocation.diff
        )
    )
    if invocation.confirm and (on_accelerator is None or on_accelerator.accelerator.emulated):
        require_compiler(settings.target, console)  # on the accelerator itself its own compile judges
    verdicts = None if no_cache else VerdictCache(settings.root or os.getcwd())
    fmt = invocation.fmt or settings.format
    keep_stdout_for_report = fmt in MACHINE_FORMATS and not invocation.output_file and not invocation.diff
    modules_before = set(sys.modules)
    progress = Progress(not invocation.quiet)
    redirect = contextlib.ExitStack()
    if keep_stdout_for_report:
        redirect.enter_context(stdout_to_stderr())

    def after_program(result) -> None:
        """Everything after the program; the runner also calls it where the program ends the
        process itself (``os._exit``) or leaves threads that Python waits for."""
        redirect.close()  # the report goes to stdout again
        sys.stdout.flush()
        where = settings.target + (f" on {pod}" if pod is not None else "")
        checked = f"{result.checked} compilation{'s' if result.checked != 1 else ''} checked for {where}"
        from offload_fixer.report import output_trees

        outcome = Outcome(checked=checked, trees=output_trees(result.reports))
        found = without_excluded(result.diagnostics, resolver, console)
        outcome.diagnostics, outcome.unused_suppressions = reportable(found, resolver)
        if result.program_exception:  # as Python prints it: a traceback, or a SystemExit's message and a newline
            click.echo(result.program_exception, err=True, nl=not result.program_exception.endswith("\n"))
        failed = result.program_exit_code not in (0, None) and result.stopped is None
        if result.process:  # process 0 of the jax.distributed program reports for all, and writes
            console.note(
                f"offload-fixer: process {result.process} of {result.processes}: {checked}; "
                f"process 0 reports the findings of all {result.processes}"
            )
            problems = any(d.severity in ("error", "warning") for d in outcome.diagnostics)
            status = ExitCode.PROGRAM_FAILED if failed else ExitCode.FINDINGS if problems else ExitCode.CLEAN
            sys.exit(int(ExitCode.CLEAN if invocation.exit_zero and status == ExitCode.FINDINGS else status))
        for silent in result.unheard:
            console.note(
                f"offload-fixer: process {silent} sent no findings within {GATHER_TIMEOUT_S:.0f} s of this "
                "one's end: its compilations are not in this report",
                always=True,
            )
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
            report_compiled(result.reports, console)
            outcome.compilations = list(result.reports)
        if result.accelerator is not None:
            from offload_fixer.cli.on_accelerator import report_failures

            report_failures(result, console, outcome, differences=not invocation.confirm)

        def save(fixes: list[Any]) -> None:
            """The report (``--report``) and the editor's last run; again with the fixes measured."""
            if report_path:
                try:
                    write_report_file(
                        report_path,
                        result.reports,
                        settings.target,
                        result.sources,
                        result.texts,
                        calls=result.calls,
                        fixes=fixes,
                        topology=pod,
                        directory=report_directory,
                    )
                except OSError as exc:  # the findings are still shown
                    console.note(
                        console.styled_error(
                            f"offload-fixer: error: cannot write the report {report_path}: {exc.strerror or exc}"
                        ),
                        always=True,
                    )
                    outcome.failure = ExitCode.USAGE
            save_last_run(None if module else program, result, settings.target, console, fixes)

        save([])
        stop = result.needs_pod or result.would_abort
        if stop is not None:
            at = (
                f"{position_text(display_path(stop.span.path, None), stop.span.line, stop.span.col)}: "
                if stop.span
                else ""
            )
            console.note(f"offload-fixer: {at}{stop.message}", always=True)
        if result.needs_pod is not None:
            stopped = "; the program needed the pod's chips to go on, so later compilations were not checked"
        elif result.would_abort is not None:
            stopped = (
                "; the program was stopped where it would abort the process, so later compilations were not checked"
            )
        else:
            stopped = (
                f"; the program failed (exit code {result.program_exit_code}), so later compilations were not checked"
            )
        console.note(
            f"offload-fixer: checked {result.checked} distinct compilation{'s' if result.checked != 1 else ''} "
            f"({result.intercepted} jit call{'s' if result.intercepted != 1 else ''} intercepted"
            + (f" in {result.processes} processes" if result.processes > 1 else "")
            + f") for {where}"
            + (stopped if failed and not result.interrupted else "")
        )
        if invocation.verbose and verdicts is not None and verdicts.hits + verdicts.misses:
            console.note(
                f"offload-fixer: {verdicts.hits} of {verdicts.hits + verdicts.misses} verdicts read from "
                f"{verdicts.folder.folder.parts[0]}/ ({verdicts.seconds:.2f} s in the cache)"
            )
        if verdicts is not None and verdicts.folder.refusal:
            console.note_once(f"offload-fixer: warning: the result cache {verdicts.folder.refusal}")
        if result.interrupted:
            console.note(
                "offload-fixer: the program was interrupted (Ctrl-C); these are the findings so far", always=True
            )
            outcome.failure = ExitCode.INTERRUPTED
            outcome.complete = False
            outcome.checked = checked + " before the program was interrupted"
        elif result.needs_pod is not None:  # where a pod program ends on a machine without the pod
            outcome.complete = False
            outcome.checked = checked + " before the program needed the pod's chips"
        elif failed:
            outcome.failure = outcome.failure or ExitCode.PROGRAM_FAILED
            outcome.complete = False
            outcome.checked = checked + " before the program failed"
        elif result.stopped is not None:
            outcome.failure = outcome.failure or ExitCode.FINDINGS
            outcome.complete = False
            outcome.checked = checked + f" before the program was stopped at {result.stopped.failure.name}"
        marks = marks_planner(settings.strategy, invocation, None, reports=result.reports)
        from offload_fixer.verify.stage import Verifier

        if invocation.fix or invocation.diff:
            from offload_fixer.fixes.scope import WriteScope, project_root

            # the hashes the runner took when it analysed each file: a file edited since is refused
            run_fixes = apply_fixes(
                outcome.diagnostics,
                settings.strategy,
                invocation,
                None,
                console,
                expected_sha256=result.sources,
                # every fix lowered again before it is written, and compiled where the compiler is
                # installed (on the accelerator itself, its run of the fixed program judges instead)
                verifier=Verifier(
                    result.reports,
                    result.calls,
                    settings.target,
                    require_compiler=invocation.confirm and result.accelerator is None,
                    compile=False if result.accelerator is not None else None,
                    strategy=settings.strategy,
                    pod=result.pod,
                ),
                reports=result.reports,
                scope=WriteScope.of([project_root(os.getcwd())], [] if module else [program]),
            )
            outcome.failure = outcome.failure or run_fixes.failure
            outcome.measured = run_fixes.measured()
            if outcome.measured:  # the editor titles its quick fixes with what the run measured
                save(outcome.measured)
            if invocation.diff:
                show_diff(run_fixes, console, outcome.diagnostics)
                outcome.pending = run_fixes.changed
                finish(outcome, invocation, settings, console)
            if run_fixes.changed:
                if invocation.show_fixes:
                    show_fixed(run_fixes, outcome.diagnostics, fmt, console)
                before = len(grouped_findings(outcome.diagnostics))
                resolved = set(run_fixes.resolved)
                outcome.diagnostics = [d for d in outcome.diagnostics if d not in resolved]
                outcome.fixed = max(before - len(grouped_findings(outcome.diagnostics)), 0)
                if result.accelerator is None:
                    console.note("offload-fixer: run the program again to check the fixed code")
                else:
                    from offload_fixer.cli.on_accelerator import forget_program_modules, run_fixed_again
                    from offload_fixer.fixes.scope import project_root

                    def rerun(again: Any) -> Any:
                        import jax

                        forget_program_modules(modules_before, project_root(os.getcwd()))
                        jax.clear_caches()  # each compilation is compiled (and checked) afresh
                        return run_program(
                            program, list(program_args), target=settings.target, is_module=module, accelerator=again
                        )

                    written = [r for r in run_fixes.results if r.written]
                    again = run_fixed_again(result, rerun, written, console, revert=invocation.confirm)
                    if not again.held:
                        outcome.failure = outcome.failure or ExitCode.FIX_REFUSED
                    outcome.measured = run_fixes.measured(again)  # the formats and the report carry its figures
                    save(outcome.measured)
            marks = marks_after_fixing(marks, run_fixes, verified=True)
        else:  # [*] only for a fix that holds, as --fix checks it before writing it

            def keep_refused(fixes: Any) -> None:
                outcome.measured = fixes.measured()
                if outcome.measured:  # the editor offers no quick fix the run refused
                    save(outcome.measured)

            marks = verified_marks(marks, outcome.diagnostics, result, settings, invocation, verdicts, keep_refused)
        if not (invocation.fix or invocation.diff) and invocation.show_fixes and outcome.diagnostics:
            planned = apply_fixes(
                outcome.diagnostics,
                settings.strategy,
                dataclasses.replace(invocation, fix=False),
                None,
                console,
                expected_sha256=result.sources,
                reports=result.reports,
            )
            show_planned_fixes(planned, console)
        finish(outcome, invocation, settings, console, marks)

    try:
        result = run_program(
            program,
            list(program_args),
            target=settings.target,
            is_module=module,
            progress=progress,
            confirm=invocation.confirm,
            finish=after_program,
            show_start_up=invocation.verbose,
            accelerator=on_accelerator,
            topology=pod,
            verdicts=verdicts,
        )
    except PodUnavailable as exc:
        redirect.close()
        fail(ExitCode.USAGE, f"--topology {topology}: {exc}", console)
    except BaseException:
        redirect.close()
        raise
    if not result.deferred:  # else the runner calls it once the program's threads are done
        after_program(result)


def verified_marks(planned, diagnostics, result, settings, invocation: Invocation, verdicts, checked) -> Any:
    """The ``[*]`` marks of a plain ``run``: what the planner would do (``planned``), where the
    fix holds as ``--fix`` checks it before writing it (:func:`verify_fixes` with the
    verification stage, seeing the run's pod where it had one); ``checked`` is handed what was
    checked (the fixes refused, for the editor). Kept with the run's verdicts (``verdicts``), for
    these findings, the compilations' verdicts and the bytes of the files they name: a second
    run of an unchanged program plans and verifies no fix again (nor hands ``checked`` anything)."""
    from offload_fixer.verify.stage import Verifier

    def marks(shown: list) -> dict:
        verifier = Verifier(
            result.reports,
            result.calls,
            settings.target,
            figures=False,
            strategy=settings.strategy,
            compile=False if result.accelerator is not None else None,
            pod=result.pod,
        )
        checked_fixes = verify_fixes(
            diagnostics, settings.strategy, invocation, verifier, result.reports, result.sources
        )
        checked(checked_fixes)
        found: dict = marks_after_fixing(planned, checked_fixes, verified=True)(shown)
        return found

    if verdicts is None:
        return marks
    kept = ("run", settings.strategy, invocation.unsafe_fixes, *sorted(set(result.kept)))
    return lambda shown: verdicts.folder.fix_marks(shown, kept, lambda: marks(shown))


def pod_topology(name: str | None, num_slices: int | None, target: str, console: Console) -> Any:
    """The pod ``--topology`` names (``None`` without it): a name the tool reads, for TPU,
    with libtpu installed to build its devices; otherwise a clear refusal."""
    from offload_fixer.topology import UnknownTopology, parse_topology

    if name is None:
        if num_slices is not None:
            fail(ExitCode.USAGE, "--num-slices is the number of slices of a --topology; name the pod too", console)
        return None
    try:
        topology = parse_topology(name, num_slices or 1)
    except UnknownTopology as exc:
        fail(ExitCode.USAGE, f"--topology: {exc}", console)
    if target != "tpu":
        fail(ExitCode.USAGE, f"--topology names a TPU pod: it checks for --target tpu, not {target}", console)
    require_compiler("tpu", console, why=f"--topology {name} needs libtpu to build the pod's devices")
    return topology


def check_writable_destination(path: str, console: Console) -> str:
    """Refuse, before the program runs, a report path whose directory is missing or read-only:
    after the run it would be too late to say so without losing what the run found. Returns
    the directory's real path, which the report is written into (a symlink swapped in since
    is refused, not followed)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        fail(ExitCode.USAGE, f"cannot write the report {path}: no directory {directory}", console)
    if not os.access(directory, os.W_OK | os.X_OK):
        fail(ExitCode.USAGE, f"cannot write the report {path}: {directory} is not writable", console)
    if os.path.exists(path) and not os.path.isfile(path):
        fail(ExitCode.USAGE, f"cannot write the report {path}: not a regular file", console)
    try:
        return resolve(directory)
    except PathChangedError as exc:
        fail(ExitCode.USAGE, f"cannot write the report {path}: {exc}", console)


def save_last_run(program: str | None, result, target: str, console: Console, fixes: Sequence[Any] = ()) -> None:
    """Every run leaves its findings where the language server looks (:mod:`offload_fixer.last_run`),
    and the fixes it measured (``fixes``); not where that folder leads out of the project."""
    from offload_fixer import last_run
    from offload_fixer.report_file import encode_report_file

    folder = last_run.folder_for(program)
    pod = result.pod.topology if result.pod is not None else None
    data = encode_report_file(result.reports, target, result.sources, result.texts, fixes=fixes, topology=pod)
    if not folder.write(last_run.FILE_NAME, data):
        if folder.refusal:
            console.note_once(f"offload-fixer: warning: the editor's copy of the run {folder.refusal}")
        else:
            console.note(f"offload-fixer: could not save the run for the editor in {folder.path}")


@main.command()
@click.argument("log", type=click.Path(allow_dash=True, readable=False), default="-")
@click.option(
    "--dump",
    "dump_dir",
    type=click.Path(file_okay=False, readable=False),
    default=None,
    help="An --xla_dump_to directory from the failing run.",
)
@options("target", "color")
@click.option(
    "--confirm",
    is_flag=True,
    help="Also compile the dumped modules (--dump) with the target's released compiler (libtpu, JAX's "
    "CUDA plugin) and say whether it agrees.",
)
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
    from offload_fixer.fixes.scope import project_root

    try:
        result = explain_log(
            text, dump_dir=dump_dir, target=target or "tpu", confirm=confirm, project=project_root(os.getcwd())
        )
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
    compiled by the released compiler first, with the arguments the run recorded, and for the
    pod of a `run --topology`."""
    from offload_fixer.report_file import read_report_file

    invocation = Invocation.take(params)
    invocation.fix = True
    console = Console(invocation)
    try:
        saved = read_report_file(report_file)
    except FileNotFoundError:
        fail(ExitCode.INPUT_ERROR, f"{report_file}: no such report", console)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        fail(ExitCode.INPUT_ERROR, f"cannot read the report {report_file}: {exc}", console)
    from offload_fixer.fixes.scope import WriteScope, project_root

    if not saved.sources:
        fail(ExitCode.INPUT_ERROR, f"{report_file}: {REPORT_WITHOUT_HASHES}", console)
    resolver, _ = resolve_settings(invocation, ".", console)
    diagnostics = without_excluded([d for r in saved.reports for d in r.diagnostics], resolver, console)
    if invocation.confirm:
        require_compiler(saved.target, console)
    from offload_fixer.jax_compat import tracing

    tracing.start_quietly()  # the fixes are lowered: JAX's plugins keep their start-up lines to themselves, as in `run`
    from offload_fixer.verify.stage import Verifier

    pod, calls = saved_calls(saved, console)
    run_fixes = apply_fixes(
        diagnostics,
        invocation.strategy or "auto",
        invocation,
        saved.jax_version,
        console,
        expected_sha256=saved.sources,
        verifier=Verifier(
            saved.reports,
            calls,
            saved.target,
            require_compiler=invocation.confirm,
            strategy=invocation.strategy or "auto",
            pod=pod,
        ),
        reports=saved.reports,
        scope=WriteScope.of([project_root(os.getcwd())]),  # a report is shared: it names paths, it is not trusted
    )
    if invocation.diff:
        show_diff(run_fixes, console, diagnostics)
    elif invocation.show_fixes:
        console.report(fixed_listing(run_fixes, diagnostics, os.getcwd()))
    for written in (r for r in run_fixes.results if r.written):
        console.note(f"offload-fixer: {shown_path(written.path)}: fixed")
    if not invocation.diff:
        from offload_fixer.report import Tally, summary_lines

        resolved = set(run_fixes.resolved)
        remaining = grouped_findings([d for d in diagnostics if d not in resolved])
        fixed = len(grouped_findings(diagnostics)) - len(remaining)
        # the words of ``check --fix`` and ``run --fix``: what was fixed and what is left
        tally = Tally(fixed=fixed, shown=not invocation.quiet)
        console.report("".join(line + "\n" for line in summary_lines(remaining, [], tally)))
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
    """List the diagnostic codes, or print the page for CODE (also spelt `rule`, as ruff does)."""
    from offload_fixer.rules import TOOL_CODES, UnknownRule, all_rules, render_rule

    console = Console(Invocation())
    if jax_version is not None:
        check_jax_version(jax_version, console)
    if code is None:
        listed = [(tool.code, tool.name, tool.summary) for tool in TOOL_CODES]
        listed += [(rule.code, rule.name, rule.summary) for rule in all_rules()]
        width = max(len(name) for _, name, _ in listed)
        for listed_code, name, summary in listed:
            click.echo(f"{listed_code}  {name:<{width}}  {summary}")
        return
    try:
        click.echo(render_rule(code, jax_version=jax_version))
    except UnknownRule as exc:
        fail(ExitCode.USAGE, str(exc.args[0] if exc.args else exc), console)
