"""The quick fixes the editor offers for each finding: planned from the editor's text as the
command line plans them (``fixes.plan_alternatives``), root cause by root cause, so that a
change in the editor can stop a planning between two (:mod:`.superseding`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from offload_fixer.lsp.superseding import Ticket, check
from offload_fixer.model import Diagnostic, MeasuredFix, Report

if TYPE_CHECKING:
    from offload_fixer.config import Settings


@dataclass(frozen=True)
class FixChoice:
    """One quick fix offered for a diagnostic, as published in its ``data``: what it does
    (``strategy``: ``device``/``host``) and the strategy it is planned with again
    (``requested``: ``auto`` picks per root cause)."""

    strategy: str
    title: str
    safety: str
    preferred: bool
    requested: str = ""
    measured: tuple[dict[str, Any], ...] = ()
    """The last run's compiler figures of this very fix (``FixMeasurement.to_dict``), in its
    title too; none where the run measured none or the document changed since."""
    reason: str = ""
    """Why no edit can be made, for a display-only fix (offered disabled, with it)."""

    def to_data(self) -> dict[str, Any]:
        data = {
            "strategy": self.strategy,
            "title": self.title,
            "safety": self.safety,
            "preferred": self.preferred,
            "requested": self.requested or self.strategy,
        }
        if self.reason:
            data["reason"] = self.reason
        if self.measured:
            data["measured"] = list(self.measured)
        return data


def fix_choices(
    diagnostics: Sequence[Diagnostic],
    text: str,
    path: str,
    settings: Settings,
    outline: Any = None,
    reports: Sequence[Report] = (),
    measured: Mapping[str, MeasuredFix] | None = None,
    ticket: Ticket | None = None,
) -> tuple[tuple[FixChoice, ...], ...]:
    """For each diagnostic, the fixes the planner can make for it in this text: one per
    strategy whose edits differ, titled with where the edit goes, the configured strategy's
    preferred where it is safe (as ``ruff server`` prefers), and the configured strategy's fix
    that no edit can make as a display-only choice, with the reason. The check's
    own outline of the text is reused, so planning cuts the text into statements no second time;
    a run's findings are planned with their ``reports`` (the output trees). ``measured``: the
    fixes the run compiled, by title; a choice with the same title carries their figures.

    Root causes are planned one at a time (the planner plans each alone), the file read once
    for all; before each, :class:`~.superseding.Superseded` is raised where a change came
    after ``ticket``."""
    from offload_fixer.findings import root_cause_key
    from offload_fixer.fixes import FIXABLE_CODES, plan_alternatives
    from offload_fixer.fixes.excerpt import FileOutline
    from offload_fixer.fixes.plan_sources import Sources

    if not any(d.code in FIXABLE_CODES for d in diagnostics):
        return tuple(() for _ in diagnostics)
    FileOutline.of(path, text, outline)
    texts = {path: encoded(text)}
    sources = Sources(texts)
    causes: dict[tuple, list[int]] = {}
    for index, d in enumerate(diagnostics):
        if d.code in FIXABLE_CODES:
            causes.setdefault(root_cause_key(d), []).append(index)
    out: list[tuple[FixChoice, ...]] = [() for _ in diagnostics]
    for indices in causes.values():
        check(ticket)
        cause = [diagnostics[i] for i in indices]
        alternatives = plan_alternatives(
            cause, settings.strategy, settings.jax_version, texts=texts, reports=reports, sources=sources
        )
        for i, d in zip(indices, cause):
            choices: list[FixChoice] = []
            seen: list[tuple] = []
            for rank, (strategy, plans) in enumerate(alternatives):
                for plan in plans:
                    fix = (measured or {}).get(plan.title)
                    if fix is not None and fix.refused:
                        continue  # the run's verification refused it: no quick fix, as `run` marks it
                    if d in plan.covered and plan.edits and plan.edits not in seen:
                        seen.append(plan.edits)
                        title = f"offload-fixer: {plan.title}" + (f" ({fix.summary})" if fix else "")
                        figures = tuple(m.to_dict() for m in fix.measured) if fix else ()
                        preferred = rank == 0 and plan.safety == "safe"  # as ruff server prefers
                        choices.append(FixChoice(plan.strategy, title, plan.safety, preferred, strategy, figures))
                    elif rank == 0 and plan.safety == "display-only" and d in plan.diagnostics:  # a suggestion
                        why, title = "; ".join(plan.problems) or "no edit can be made", f"offload-fixer: {plan.title}"
                        choices.append(FixChoice(plan.strategy, title, plan.safety, False, strategy, reason=why))
            out[i] = tuple(choices)
    return tuple(out)


def encoding_of(text: str) -> str:
    """The encoding the file would be written in: its coding cookie (PEP 263) decides, else UTF-8."""
    from offload_fixer.source.decoding import SourceDecodeError, detect_encoding

    try:
        encoding = detect_encoding(text.encode("utf-8", "surrogatepass"))
        text.encode(encoding)
    except (SourceDecodeError, LookupError, UnicodeEncodeError):
        return "utf-8"
    return encoding


def encoded(text: str) -> bytes:
    """The bytes the file would hold."""
    return text.encode(encoding_of(text), "surrogatepass")
