"""Does the analysis agree with the compiler? One comparison, shared by the fidelity tests, the
fidelity script and ``--confirm``.

Outcomes are compared in three classes, the confusion matrix the fidelity script prints:
``E1200`` (XLA's error 1200), ``compiled``, and ``other`` (any other rejection, or an abort).
Within a class the details XLA gives are compared too: the instruction its error names and
the output its trace ends at, the code of another error where XLA's text maps to one, whether
it warned of host compute, and each compiled output's memory kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from offload_fixer import codes
from offload_fixer.model import Report, XlaVerdict
from offload_fixer.rules import get_rule
from offload_fixer.xla_messages import summary

Outcome = Literal["E1200", "compiled", "other", "unknown"]


@dataclass(frozen=True)
class Agreement:
    tool: Outcome
    xla: Outcome
    differences: tuple[str, ...]
    """Each way the analysis and XLA differ, in words; empty when they agree."""

    @property
    def agrees(self) -> bool:
        return not self.differences


def outcome_class(outcome: str, code: str | None) -> Outcome:
    if outcome == "compiled":
        return "compiled"
    if outcome in ("rejected", "aborted"):
        return "E1200" if code == codes.HOST_VALUE_DEVICE_OUTPUT else "other"
    return "unknown"


def compare(report: Report, verdict: XlaVerdict) -> Agreement:
    """How ``report`` (the analysis of a module) and ``verdict`` (XLA's compile of it) agree."""
    predicted = report.predicted
    assert predicted is not None, "the report carries no prediction (made by an older analysis?)"
    tool = outcome_class(predicted.outcome, predicted.code)
    xla = outcome_class(verdict.outcome, verdict.code)
    differences: list[str] = []
    if xla == "unknown":
        differences.append(f"the compiler gave no verdict: {verdict.message}")
    elif tool != xla:
        said = f": {summary(verdict.message)}" if verdict.message.strip() else ""
        differences.append(f"the analysis predicts {tool}, {verdict.compiler} says {xla}{said}")
    elif xla == "E1200":
        if verdict.instruction and predicted.instruction != verdict.instruction:
            differences.append(
                f"error 1200 starts from {verdict.instruction} for XLA, from {predicted.instruction} for the analysis"
            )
        if verdict.output_index is not None and predicted.output_index != verdict.output_index:
            differences.append(
                f"XLA's trace ends at output {verdict.output_index}, the analysis at {predicted.output_index}"
            )
    elif xla == "other":
        if verdict.code and predicted.code != verdict.code:
            differences.append(f"XLA's error is {verdict.code}, the analysis predicts {predicted.code}")
    elif xla == "compiled":
        tool_host_compute = any(d.code in codes.HOST_COMPUTE_WARNING_CODES for d in report.diagnostics)
        if tool_host_compute != bool(verdict.host_compute):
            differences.append(
                f"host compute: XLA warns of {list(verdict.host_compute) or 'none'}, the analysis reports "
                f"{'some' if tool_host_compute else 'none'}"
            )
        for diagnostic in report.diagnostics if verdict.memory is not None else ():
            evidence = get_rule(diagnostic.code).compiled_evidence
            if evidence is not None and evidence(verdict, diagnostic) is None:
                differences.append(f"{diagnostic.code}: the compiled program keeps what the analysis says it does not")
        kinds = tuple(output.compiled_memory_kind for output in report.outputs)
        if verdict.output_memory_kinds and kinds and kinds != verdict.output_memory_kinds:
            differences.append(f"compiled output memory kinds: XLA {verdict.output_memory_kinds}, analysis {kinds}")
    return Agreement(tool, xla, tuple(differences))
