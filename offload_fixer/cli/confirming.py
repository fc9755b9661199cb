"""``--confirm``: the compiler required, and its verdicts on the run said in its own words."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from offload_fixer.cli.options import Console, Outcome, fail
from offload_fixer.exit_codes import ExitCode


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


def report_compiled(reports: Sequence[Any], console: Console) -> None:
    """``--confirm`` where the compiler compiled every compilation: said, so that a clean
    report is known to be the compiler's verdict too, not only the analysis's."""
    verdicts = [report.xla for report in reports if report.xla is not None]
    if not verdicts or len(verdicts) != len(reports) or any(v.outcome != "compiled" for v in verdicts):
        return
    if any(report.unpredicted for report in reports):
        return
    compilers = ", ".join(sorted({v.compiler for v in verdicts}))
    count = len(verdicts)
    console.note(
        f"offload-fixer: --confirm: {compilers} compiled {count} compilation{'s' if count != 1 else ''}, as predicted"
    )
