"""Candidate plans for each root cause, and the choice among them once each is checked.

A plan that does not lower from the fixed source (or, with ``--confirm``, that the compiler
rejects) is not written; the next candidate for the same root cause is tried instead: the
configured strategy's plan, its wider variant (a scanned stack moved whole where the function
starts, not slice by slice), then, under ``auto``, each other strategy's plan. Where the
compiler is installed, one that compiles is preferred, and its memory figures go with it.
With ``--confirm`` the first few are compiled and the one holding the fewest device bytes is
chosen among those placing the outputs alike (:func:`choose`, ``rank``). Checking is the caller's (``FixConfirmation`` in the CLI): this module knows no JAX.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from offload_fixer.findings import root_cause_key
from offload_fixer.fixes.plan_sources import Sources
from offload_fixer.fixes.planner import FixPlan, plan_fixes
from offload_fixer.model import FIX_STRATEGIES, Diagnostic, byte_size


@dataclass(frozen=True)
class Trial:
    """What checking one set of plans found."""

    ok: bool
    """Every checked function lowers (and, where compiling is required, compiles)."""
    reason: str = ""
    """Why not; empty when ``ok``."""
    compiled: bool = False
    device_bytes: int | None = None
    """HBM the compiled fixed functions hold (``MemoryFigures.device_total``, summed)."""
    detail: Any = None
    """The checker's own record (its verdicts, figures), handed back with the choice."""
    placement: tuple[tuple[str, ...], ...] | None = None
    """The memory kind of each output of each compiled function (``None`` uncompiled): plans
    are ranked by bytes only among those that place the outputs alike."""


@dataclass(frozen=True)
class Choice:
    plans: tuple[FixPlan, ...]
    """The plans to write, one per root cause that has a valid one."""
    trial: Trial | None
    """The check of exactly those plans (None when there are none)."""
    left: tuple[tuple[FixPlan, str], ...] = ()
    """The first candidate of each root cause left unfixed, with the one line that says why."""
    replaced: tuple[tuple[FixPlan, FixPlan, str], ...] = ()
    """(first candidate, the one chosen instead, why) for each root cause that changed plan."""
    ranked: tuple[tuple[tuple[FixPlan, int], ...], ...] = ()
    """With ``rank``: per root cause whose candidates were compiled and compared, each
    compared plan and the device bytes it holds, the chosen (fewest) first."""


RANKED = 3
"""With ``rank`` (``--confirm``), the candidates compiled per root cause to compare bytes."""


def candidate_plans(
    diagnostics: Sequence[Diagnostic],
    strategy: str,
    jax_version: str | None = None,
    *,
    reports: Iterable[Any] = (),
    texts: Mapping[str, bytes] | None = None,
    eligible: Callable[[FixPlan], bool] = lambda plan: True,
    sources: Sources | None = None,
) -> dict[tuple[str, Any], list[FixPlan]]:
    """Per (file, root cause), the plans to try, best first, each making edits of its own:
    ``strategy``'s, its wider variant, and under ``auto`` the explicit strategies' (an explicit
    strategy is never swapped for another). ``eligible``: which plans may be written at all
    (safe ones, unsafe ones with ``--unsafe-fixes``). ``sources``: as for :func:`plan_fixes`;
    the runs share them either way, so each file is parsed once for all of them."""
    reports = list(reports)
    sources = Sources(texts or {}) if sources is None else sources
    runs = [(strategy, True), (strategy, False)]
    if strategy == "auto":
        runs += [(other, narrow) for other in FIX_STRATEGIES for narrow in (True, False)]
    found: dict[tuple[str, Any], list[FixPlan]] = {}
    seen: dict[tuple[str, Any], list[Any]] = {}
    for run_strategy, narrow in runs:
        for plan in plan_fixes(
            list(diagnostics), run_strategy, jax_version, texts=texts, reports=reports, narrow=narrow, sources=sources
        ):
            key = (plan.path, root_cause_key(plan.diagnostics[0]))
            found.setdefault(key, [])
            if plan.safety == "display-only" or not plan.edits or not eligible(plan):
                continue
            edits = seen.setdefault(key, [])
            if plan.edits in edits:
                continue
            edits.append(plan.edits)
            found[key].append(plan)
    return found


def choose(
    options: Sequence[Sequence[FixPlan]],
    check: Callable[[Sequence[FixPlan]], Trial],
    measure: bool = False,
    rank: bool = False,
) -> Choice:
    """The plans to write for one file: root cause by root cause, each candidate checked with
    the plans already chosen (the root causes not yet reached left unfixed; the last check is of
    the whole chosen set, so its figures are the fix's); the first valid one,
    or with ``measure`` the first that compiles too (else the first that lowers). With ``rank``
    (``--confirm``: every candidate is compiled), up to :data:`RANKED` candidates of a root
    cause are compiled and the one holding the fewest device bytes is chosen, among those that
    place the outputs as the first that compiles does (:attr:`Trial.placement`): bytes alone
    would prefer returning the state the user keeps in host memory in device memory (measured,
    libtpu 0.0.42.1: the state kept host costs HBM), which undoes the offload. So what bytes
    decide is where the move goes (a stack moved slice by slice in the scan's body or whole),
    from the figures of the recorded shapes: a small stack moved whole holds less than slice by
    slice (tile padding, the residuals of a differentiated scan), a large one more. The figures
    are reported with the fix (``Trial.device_bytes``, :attr:`Choice.ranked`). A root cause no
    candidate fixes is left, and says why in one line."""
    firsts = [plans[0] for plans in options if plans]
    several = rank and any(len(plans) > 1 for plans in options)
    whole = check(firsts) if firsts and not several else None  # one check where they all hold
    if whole is not None and whole.ok and (whole.compiled or not measure):
        return Choice(tuple(firsts), whole)
    accepted: list[FixPlan] = []
    last: Trial | None = None
    left: list[tuple[FixPlan, str]] = []
    replaced: list[tuple[FixPlan, FixPlan, str]] = []
    ranked: list[tuple[tuple[FixPlan, int], ...]] = []
    for plans in options:
        if not plans:
            continue
        failed: list[tuple[FixPlan, str]] = []
        best: tuple[FixPlan, Trial] | None = None
        compared: list[tuple[FixPlan, Trial]] = []
        for index, plan in enumerate(plans):
            if rank and len(plans) > 1 and index >= RANKED and best is not None:
                break  # RANKED candidates compared; more only while none holds
            trial = check([*accepted, plan])
            if not trial.ok:
                failed.append((plan, trial.reason))
                continue
            if rank and trial.compiled and trial.device_bytes is not None:
                compared.append((plan, trial))
            if best is None or (trial.compiled and not best[1].compiled):
                best = (plan, trial)
            if rank and len(plans) > 1:
                continue  # the candidates (up to RANKED) compiled, then compared
            if not measure or trial.compiled:
                break
        if compared:
            alike = [(p, t) for p, t in compared if t.placement == compared[0][1].placement]
            fewest = min(alike, key=lambda pt: pt[1].device_bytes or 0)  # the earliest of equals
            best = fewest
            if len(alike) > 1:
                ordered = [fewest, *(pt for pt in alike if pt is not fewest)]
                ranked.append(tuple((p, t.device_bytes or 0) for p, t in ordered))
        if best is None:
            count = len(plans)
            left.append(
                (
                    plans[0],
                    f"none of the {count} candidate plans for this root cause is valid: " + _reasons(failed, plans[0]),
                )
                if count > 1
                else (plans[0], f"{failed[0][1]}; no other candidate plan for this root cause")
            )
            continue
        plan, last = best
        accepted.append(plan)
        if plan is not plans[0]:
            first = next((t for p, t in compared if p is plans[0]), None)
            if first is not None:
                why = f"fewer device bytes: {byte_size(last.device_bytes or 0)} against {byte_size(first.device_bytes or 0)}"
            else:
                why = failed[0][1] if failed else "the first lowers but does not compile"
            replaced.append((plans[0], plan, why))
    return Choice(tuple(accepted), last if accepted else None, tuple(left), tuple(replaced), tuple(ranked))


def _reasons(failed: Sequence[tuple[FixPlan, str]], first: FixPlan) -> str:
    """Why each candidate failed, once each: the first (whose title the finding's mark
    already gives) by its reason alone, the others named; a reason they all share (the fixed
    file cannot be imported to verify any of them) once."""
    if len({why for _, why in failed}) == 1:
        return failed[0][1]
    return "; ".join(why if plan is first else f"{plan.title}: {why}" for plan, why in failed)
