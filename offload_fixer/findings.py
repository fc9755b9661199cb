"""Findings: diagnostics grouped by root cause, as the text output shows them.

The analysis reports one diagnostic per output a host value reaches (the JSON keeps them
all). A user fixes a root cause: the place where a value became host memory in one jitted
function, which is what the fix planner groups by too (:func:`root_cause_key`).
So the text output shows one finding per code and root cause, with the outputs it reaches
beneath it, and marks it ``[*]`` only when ``--fix`` would write a fix for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from offload_fixer.model import Diagnostic, Span

SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class FixMark:
    """What ``--fix`` does about a finding."""

    title: str
    status: Literal["applied", "unsafe", "manual"]
    """``applied``: ``--fix`` writes it (``[*]``); ``unsafe``: only with ``--unsafe-fixes``;
    ``manual``: no edit can be made (``detail`` says why)."""
    detail: str = ""
    """Why no edit can be made (``manual``), or why the edit is unsafe (``unsafe``)."""
    body: str = ""
    """What the title leaves out (which outputs the fix keeps host memory)."""


_PREFERENCE = {"applied": 0, "unsafe": 1, "manual": 2}


@dataclass(frozen=True)
class Finding:
    """One code at one root cause: its diagnostics, the most severe first."""

    diagnostics: tuple[Diagnostic, ...]
    fix: FixMark | None = None

    @property
    def head(self) -> Diagnostic:
        return self.diagnostics[0]

    @property
    def fixable(self) -> bool:
        return self.fix is not None and self.fix.status == "applied"


def group_findings(
    diagnostics: Iterable[Diagnostic], marks: Mapping[Diagnostic, FixMark] | None = None
) -> list[Finding]:
    """One :class:`Finding` per (code, root cause), ordered by where the root cause is, then
    by severity: an error and the warnings its host value causes stay together."""
    marks = marks or {}
    groups: dict[tuple[Any, ...], list[Diagnostic]] = {}
    for d in diagnostics:
        groups.setdefault((d.code, root_cause_key(d)), []).append(d)
    found = []
    for members in groups.values():
        members.sort(
            key=lambda d: (
                SEVERITY_RANK.get(d.severity, 3),
                _where(location(d)),
                d.output_index if d.output_index is not None else -1,
                d.output_path or "",
            )
        )
        found.append(Finding(tuple(members), _mark_of(members, marks)))
    found.sort(
        key=lambda f: (
            _where(anchor(f.head)),
            SEVERITY_RANK.get(f.head.severity, 3),
            f.head.code,
            _where(location(f.head)),
        )
    )
    return found


def _mark_of(members: Sequence[Diagnostic], marks: Mapping[Diagnostic, FixMark]) -> FixMark | None:
    """A finding's mark: ``applied`` (``[*]``) only where ``--fix`` removes every one of its
    diagnostics, as the fixed count counts it; else the most hopeful mark of those it leaves
    (unsafe, then manual), or where they have none, that the fix leaves part of it."""
    applied = [marks[d] for d in members if d in marks and marks[d].status == "applied"]
    if applied and len(applied) == len(members):
        return applied[0]
    others = [marks[d] for d in members if d in marks and marks[d].status != "applied"]
    if others:
        return min(others, key=lambda m: _PREFERENCE[m.status])
    if applied:
        left = len(members) - len(applied)
        return FixMark(applied[0].title, "manual", f"the fix leaves {left} of its {len(members)} outputs")
    return None


# ---------------------------------------------------------------------------------------
# Root causes: how the findings are grouped, and the fix planner's jobs
def source_path(d: Diagnostic) -> str | None:
    """The file a fix of ``d`` edits: its jitted function's, else its origin's, its return's or its own."""
    candidates = [
        d.function.path if d.function else None,
        d.origin.span.path if d.origin and d.origin.span else None,
        d.return_span.path if d.return_span else None,
        d.span.path if d.span else None,
    ]
    return next((p for p in candidates if p), None)


def origin_key(d: Diagnostic) -> str:
    """Where ``d``'s host value comes from, as one string."""
    origin = d.origin
    if origin is None:
        span = d.span
        return f"{d.code}:{span.path}:{span.line}:{span.col}" if span else f"output:{d.output_path}"
    if origin.key:
        return origin.key
    span = origin.span
    return f"{origin.kind}:{span.path}:{span.line}:{span.col}" if span else f"{origin.kind}:{origin.detail}"


def root_cause_key(d: Diagnostic) -> tuple[Any, ...]:
    """By root cause: the origin; the leaves of one streamed argument (one origin each) are
    one, and so are the codes (OFL1200, OFL1201, ...) a root cause produces."""
    function = (d.function.name, d.function.line) if d.function else None
    origin = origin_key(d)
    if d.origin is not None and d.origin.kind == "host_argument" and d.origin.argument:
        origin = f"argument:{split_argument(d.origin.argument)[0]}"
    elif d.origin is not None and d.origin.span is not None:
        span = d.origin.span  # a device_put of a pytree: one move per leaf, one line of source
        origin = f"{d.origin.kind}:{span.path}:{span.line}:{span.col}"
    return (source_path(d), function, origin)


def split_argument(label: str) -> tuple[str, str]:
    """``params['mu'].count`` -> (``params``, ``['mu'].count``): JAX's argument label."""
    end = 0
    while end < len(label) and (label[end].isalnum() or label[end] == "_"):
        end += 1
    return label[:end], label[end:]


def location(diagnostic: Diagnostic) -> Span | None:
    """Where a diagnostic is reported; falls back to the ``def`` line of the jitted function."""
    span = diagnostic.location
    if span is None and diagnostic.function and diagnostic.function.path:
        span = Span(diagnostic.function.path, diagnostic.function.line or 1, cell=diagnostic.function.cell)
    return span


def anchor(diagnostic: Diagnostic) -> Span | None:
    """Where the root cause is: the origin, else where the diagnostic is reported."""
    return (diagnostic.origin.span if diagnostic.origin else None) or location(diagnostic)


def _where(span: Span | None) -> tuple[str, int, int]:
    return (span.path, span.line, span.col) if span else ("", 0, 0)


# ---------------------------------------------------------------------------------------
# What the fixes cover
def resolved_by(plan: Any, diagnostics: Sequence[Diagnostic]) -> list[Diagnostic]:
    """The diagnostics a fix plan removes once applied: those its edits fix
    (``FixPlan.covered``: a move to device before the computation settles the host compute and
    the outputs it reaches; spelling ``pinned_host`` the trap and its outputs)."""
    covered = set(plan.covered)
    return [d for d in diagnostics if d in covered]


def fix_marks(diagnostics: Sequence[Diagnostic], plans: Iterable[Any], unsafe: bool) -> dict[Diagnostic, FixMark]:
    """Each diagnostic a plan covers, with what ``--fix`` (``unsafe``: ``--unsafe-fixes``)
    does about it."""
    marks: dict[Diagnostic, FixMark] = {}
    for plan in plans:
        if plan.safety == "display-only":
            mark = FixMark(plan.title, "manual", "; ".join(plan.problems))
            covered = list(plan.diagnostics)
        else:
            status: Literal["applied", "unsafe"] = "applied" if plan.safety == "safe" or unsafe else "unsafe"
            why = "; ".join(dict.fromkeys(r for r in plan.unsafe_reasons if r)) if status == "unsafe" else ""
            mark = FixMark(plan.title, status, why, plan.detail)
            covered = resolved_by(plan, diagnostics)
        for d in covered:
            if d not in marks or _PREFERENCE[mark.status] < _PREFERENCE[marks[d].status]:
                marks[d] = mark
    return marks


# ---------------------------------------------------------------------------------------
# The marks once the verification stage has checked the plans
UNCLAIMED = "not written: no fix that holds when checked before writing removes it"
LEFT_AFTER = "the fixed source, analysed again, still has it"


def verified_marks(
    diagnostics: Sequence[Diagnostic], planned: Mapping[Diagnostic, FixMark], results: Iterable[Any], decided: bool
) -> dict[Diagnostic, FixMark]:
    """What ``--fix`` does about each of ``diagnostics`` once the verification stage has checked
    the plans (``results``: each file's result, with the plans it applies and those it skipped
    with why): ``[*]`` names the plan written (another candidate where the first did not hold);
    a finding whose fix was refused before it was written (it does not lower, the compiler
    rejects it, the fixed source still fails) or that the fix written leaves
    (``FixPlan.left_after``) says why, never ``[*]``. ``planned``: the planner's own marks
    (``unsafe`` and ``display-only`` are its labels'). ``decided``: the stage checked every
    plan, so a finding the planner would fix that no written plan removes is not ``[*]`` either
    (the same predicate for the marks, the fixable count and ``--fix``)."""
    wanted = set(diagnostics)
    chosen: dict[Diagnostic, FixMark] = {}
    left: dict[Diagnostic, FixMark] = {}
    refused: dict[Diagnostic, FixMark] = {}
    for result in results:
        for plan in result.applied if result.error is None else ():
            for d in resolved_by(plan, diagnostics):
                chosen.setdefault(d, FixMark(plan.title, "applied", body=plan.detail))
            for d in plan.left_after:
                if d in wanted:
                    left.setdefault(d, FixMark(plan.title, "manual", LEFT_AFTER))
        for plan, why in result.skipped:
            if why.startswith(("unsafe", "display-only")) or plan.safety == "display-only":
                continue
            for d in resolved_by(plan, diagnostics):
                refused.setdefault(d, FixMark(plan.title, "manual", f"not written: {why}"))
    found = {**planned, **left, **chosen, **refused}
    if decided:
        for d, mark in found.items():
            if mark.status == "applied" and d not in chosen:
                found[d] = FixMark(mark.title, "manual", UNCLAIMED)
    return found
