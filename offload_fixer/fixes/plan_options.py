"""The fixes a finding can get: the plans of every strategy, and the options they give each
finding, as the editor and the reports show them (``--fix`` applies the first)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from offload_fixer.codemods.targets import Edit
from offload_fixer.fixes.plan_sources import Sources
from offload_fixer.fixes.planner import FIXABLE_CODES, FixPlan, plan_fixes
from offload_fixer.model import FIX_STRATEGIES, Diagnostic, FixOption, Report


def plan_alternatives(
    diagnostics: Sequence[Diagnostic],
    strategy: str = "auto",
    jax_version: str | None = None,
    *,
    texts: Mapping[str, bytes] | None = None,
    reports: Iterable[Report] = (),
    places: Mapping[str, Callable[[int], str]] | None = None,
    sources: Sources | None = None,
) -> list[tuple[str, list[FixPlan]]]:
    """(strategy, plans) for the configured strategy, then for each other explicit one: the
    fixes a finding can get, the one ``--fix`` applies first. ``sources``: the files as read
    for an earlier plan from the same ``texts``, kept (:func:`plan_fixes`)."""
    reports = list(reports)
    if sources is None:
        sources = Sources(texts or {})  # each file read and parsed once for every strategy
    order = [strategy, *(s for s in FIX_STRATEGIES if s != strategy)]
    return [
        (s, plan_fixes(diagnostics, s, jax_version, texts=texts, reports=reports, places=places, sources=sources))
        for s in order
    ]


def fix_options(
    alternatives: Sequence[tuple[str, Sequence[FixPlan]]], diagnostics: Iterable[Diagnostic]
) -> list[Diagnostic]:
    """The diagnostics with their ``fixes`` replaced by what the plans can apply: one option
    per plan that fixes it (the configured strategy's first, then another strategy's that
    edits differently, titled with the flag that picks it), each titled with where the edit
    goes; a diagnostic no plan fixes keeps only its advice (the rule's display-only remedies,
    and why no edit is possible)."""
    out = []
    for d in diagnostics:
        if d.code not in FIXABLE_CODES:
            out.append(d)
            continue
        options: list[FixOption] = []
        seen: list[tuple[Edit, ...]] = []
        for index, (strategy, plans) in enumerate(alternatives):
            for plan in plans:
                if d in plan.covered and plan.edits and plan.edits not in seen:
                    seen.append(plan.edits)
                    flag = f" (with --strategy {strategy})" if index else ""
                    options.append(FixOption(plan.strategy, plan.title + flag, plan.rationale, plan.safety))
        if not options:
            options = [f for f in d.fixes if f.safety == "display-only"]
            problems = [
                p for _, plans in alternatives[:1] for plan in plans if d in plan.diagnostics for p in plan.problems
            ]
            if problems:
                options.insert(
                    0, FixOption("device", "No edit can be made", "; ".join(dict.fromkeys(problems)), "display-only")
                )
        out.append(replace(d, fixes=tuple(options)))
    return out
