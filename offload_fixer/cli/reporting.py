"""The end of a command: the report, the summary line and the exit status."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from offload_fixer.cli.fixing import FixRun, colour_diff, would_fix_line
from offload_fixer.cli.options import Console, Invocation, Outcome
from offload_fixer.codes import IO_ERROR
from offload_fixer.exit_codes import ExitCode
from offload_fixer.model import Diagnostic


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

    for note in outcome.notes:
        console.note(f"offload-fixer: {note}")
    fmt = invocation.fmt or settings.format
    shown = [d for d in outcome.diagnostics if invocation.verbose or fmt != "text" or d.severity != "info"]
    fix_only = invocation.fix_only and not invocation.diff
    if fix_only:  # what is left is not reported; a path that could not be read is still named
        warn_unread_paths(shown, [], console)
        shown = []
    text_like = fmt in ("text", "concise")
    marks = marks_for(shown) if marks_for and shown and (text_like or invocation.statistics) else {}
    tally = Tally(
        checked=outcome.checked,
        fixed=outcome.fixed,
        complete=outcome.complete,
        shown=not invocation.quiet,
        fix_only=fix_only,
    )
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
            compilations=outcome.compilations,
            measured=outcome.measured,
            trees=outcome.trees,
        )
    console.report(text)
    console.flush()
    for note in outcome.internal_errors:
        console.note(console.styled_error(note), always=True)
    if outcome.failure is not None:
        sys.exit(int(outcome.failure))
    if outcome.file_errors:
        sys.exit(int(ExitCode.INPUT_ERROR))
    if invocation.exit_non_zero_on_fix and outcome.written:
        sys.exit(int(ExitCode.FINDINGS))
    found = not invocation.diff and any(d.severity in ("error", "warning") for d in shown)  # --diff: ruff's "fix only"
    if (found or outcome.pending) and not invocation.exit_zero:
        sys.exit(int(ExitCode.FINDINGS))
    sys.exit(int(ExitCode.CLEAN))


def warn_unread_paths(found: Sequence[Diagnostic], reported: Sequence[Diagnostic], console: Console) -> None:
    """Each path that could not be read (``found``) whose finding is not ``reported`` (its code
    not selected, ``--fix-only``): a warning on stderr, as ruff's ``Failed to lint``, never silence."""
    kept = set(reported)
    for d in found:
        if d.code == IO_ERROR and d not in kept and d.span is not None:
            console.note(f"offload-fixer: warning: {d.span.path}: not checked: {d.message}")


def marks_planner(
    strategy: str,
    invocation: Invocation,
    jax_version: str | None,
    texts: dict[str, bytes] | None = None,
    reports: Sequence[Any] = (),
    results: Any = None,
) -> Callable[[list[Diagnostic]], dict]:
    """What ``--fix`` would do about each finding, for the ``[*]`` marks; ``results``: the
    result cache, which keeps the marks of findings seen before (files named, not ``texts``)."""

    def marks(diagnostics: list[Diagnostic]) -> dict:
        from offload_fixer.findings import fix_marks
        from offload_fixer.recursion import call_allowing_deep_recursion

        def plan() -> dict:
            """Plan the fixes (no file is written) and mark what they cover."""
            from offload_fixer.fixes import FIXABLE_CODES, plan_fixes

            if not any(d.code in FIXABLE_CODES for d in diagnostics):
                return {}
            plans = call_allowing_deep_recursion(
                lambda: plan_fixes(
                    diagnostics, strategy=strategy, jax_version=jax_version, texts=texts, reports=reports
                )
            )
            return fix_marks(diagnostics, plans, invocation.unsafe_fixes)

        try:
            if results is not None and texts is None and not reports:
                return results.fix_marks(diagnostics, (strategy, invocation.unsafe_fixes, jax_version), plan)
            return plan()
        except RecursionError:  # too deep to plan a fix for: the findings are shown without marks
            return {}

    return marks


def show_diff(run: FixRun, console: Console, diagnostics: Sequence[Diagnostic]) -> None:
    """``--diff``: the diffs, then ``Would fix N problems.``, on stdout as ruff 0.17 prints
    them; nothing at all when there is nothing to fix."""
    from offload_fixer.findings import group_findings, resolved_by

    for result in run.results:
        if result.changed and result.error is None:
            console.report(colour_diff(result.diff, console.color_out))
    resolved = set(run.resolved)
    unsafe = {
        d
        for result in run.results
        if result.error is None
        for plan, why in result.skipped
        if why.startswith("unsafe")
        for d in resolved_by(plan, diagnostics)
    }
    findings = group_findings(diagnostics)
    count = sum(all(d in resolved for d in f.diagnostics) for f in findings)
    hidden = sum(
        any(d in unsafe for d in f.diagnostics) and not all(d in resolved for d in f.diagnostics) for f in findings
    )
    line = would_fix_line(count, hidden)
    if line and not console.quiet:
        console.report(line + "\n")
