"""What ``check`` reads: the files named or found, standard input, the static check over them."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

from offload_fixer.cli.fixing import FixRun, apply_fixes, colour_diff, fixed_listing
from offload_fixer.cli.options import PYTHON_SUFFIXES, Console, Invocation, Outcome, fail
from offload_fixer.cli.reporting import finish, marks_planner, show_diff
from offload_fixer.cli.settings import reportable, resolve_settings
from offload_fixer.codes import IO_ERROR
from offload_fixer.console import Progress
from offload_fixer.exit_codes import ExitCode
from offload_fixer.model import Diagnostic, Span


def show_fixed(run: FixRun, diagnostics: Sequence[Diagnostic], fmt: str, console: Console) -> None:
    """``--fix --show-fixes``: in the text report, or on stderr beside a machine format."""
    listing = fixed_listing(run, diagnostics, os.getcwd())
    if fmt in ("text", "concise"):
        console.report(listing)
    elif listing:
        console.note(listing.rstrip())


def grouped_findings(diagnostics: Sequence[Diagnostic]) -> list:
    from offload_fixer.findings import group_findings

    return group_findings(d for d in diagnostics if d.severity != "info")


def show_planned_fixes(run: FixRun, console: Console) -> None:
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


def files_to_check(paths: Sequence[str], force_exclude: bool, excluded: Callable[[str], bool]) -> Iterable[Any]:
    """The walk of each directory (``.gitignore``; ``exclude`` and ``extend-exclude``:
    ``excluded(path)``, each file by its own ``[tool.offload-fixer]`` table and the command
    line's flags); files named on the command line as given, unless ``--force-exclude`` and
    excluded. A path the walk could not use (an unreadable directory, a symlink loop, a FIFO
    named ``*.py``) comes as an ``Unreadable``."""
    from offload_fixer.static.files import walk

    for path in paths:
        if force_exclude and excluded(path):
            continue
        yield from walk([path], excluded)


def missing_path(path: str) -> Any:
    """A path named on the command line that does not exist, as the walk names a path it
    cannot use: checked as one finding among the others, never the end of the run."""
    from offload_fixer.static.files import Unreadable

    return Unreadable(path, f"cannot read: {os.strerror(errno.ENOENT)}")


def io_error(path: str, reason: str, target: str) -> Diagnostic:
    """A path that cannot be read, as ruff's E902: a finding of its own code, reported beside
    the other files' findings and counted with them."""
    return Diagnostic(
        code=IO_ERROR,
        severity="error",
        target=target,
        message=reason,
        explanation="",
        span=Span(path, 1, 1),
        source="static",
    )


def io_errors_as_file_errors(diagnostics: Sequence[Diagnostic]) -> list[Any]:
    """The paths that could not be read, as files not checked (``--add-noqa``, which has no line
    to put a directive on for them)."""
    from offload_fixer.report import FileError

    return [FileError(d.span.path, 1, 1, d.message) for d in diagnostics if d.code == IO_ERROR and d.span]


def check_files(
    files: Sequence[str],
    named: set[str],
    settings,
    progress: Progress,
    settings_for: Callable[[str], Any] | None = None,
    unreadable: Sequence[Any] = (),
    caches: dict | None = None,
    results: Any = None,
    texts: dict[str, bytes] | None = None,
) -> Outcome:
    """The static check of ``files``, each with its own target and JAX version, and a file
    error for each path the walk could not use: nothing is skipped in silence. ``caches``:
    the parsed statements of the files with findings, kept for a second check; ``results``:
    the :class:`~offload_fixer.static.cache.ResultCache` of earlier runs. ``texts``: files
    as fixed in memory, checked instead of what they hold (never from or into ``results``)."""
    from offload_fixer.report import FileError
    from offload_fixer.static import check_paths

    outcome = Outcome(checked=f"{len(files)} file{'s' if len(files) != 1 else ''} checked")
    outcome.diagnostics += [io_error(item.path, item.reason, settings.target) for item in unreadable]
    hits = results.hits if results is not None else 0
    checked = check_paths(
        files,
        target=settings.target,
        jax_version=settings.jax_version,
        jobs=settings.jobs,
        check_syntax=named,
        settings_for=settings_for,
        caches=caches,
        results=None if texts else results,
        texts=texts,
    )
    analysed = 0
    with progress, contextlib.closing(checked):
        for done, result in enumerate(checked, 1):
            analysed += result.analysed
            progress.count("Checking", done, len(files))
            if result.skipped is not None:
                outcome.notes.append(f"{result.path}: {result.skipped}")
            if result.parse_error is not None and result.parse_error.unreadable:
                outcome.diagnostics.append(io_error(result.path, result.parse_error.message, settings.target))
            elif result.parse_error is not None:
                err = result.parse_error
                outcome.file_errors.append(FileError(result.path, err.line, err.col, err.message))
            if result.internal_error is not None:
                outcome.internal_errors.append(result.internal_error)
            if caches is not None and not result.diagnostics:
                caches.pop(result.path, None)
            outcome.diagnostics.extend(result.diagnostics)
    cached = (results.hits - hits) if results is not None else 0
    outcome.analysed = (
        f"offload-fixer: {len(files)} file{'s' if len(files) != 1 else ''}: {analysed} analysed"
        + (f" ({cached} read from the cache)" if cached else "")
        + f", {len(files) - analysed} ruled out by the prefilter"
    )
    return outcome


def result_cache(settings: Any) -> Any:
    """The results earlier runs kept in the project's ``.offload-fixer-cache/`` (the directory
    of the ``pyproject.toml`` that configures the run, else the working directory)."""
    from offload_fixer.static.cache import ResultCache

    return ResultCache(settings.root or os.getcwd())


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
    if result.internal_error is not None:
        outcome.internal_errors.append(result.internal_error)
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
            before = len(grouped_findings(outcome.diagnostics))
            again = check_source(new, path, target=settings.target, jax_version=settings.jax_version)
            outcome.diagnostics, outcome.unused_suppressions = reportable(
                again.diagnostics, resolver, {path: new.decode("utf-8", errors="surrogateescape")}
            )
            outcome.fixed = max(before - len(grouped_findings(outcome.diagnostics)), 0)
            outcome.written = True
            marks = marks_planner(settings.strategy, invocation, settings.jax_version, {path: new})
    elif invocation.write:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    finish(outcome, invocation, settings, console, marks)
