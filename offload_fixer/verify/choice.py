"""The choice among the candidate plans of each root cause once each is checked: the first that
holds, or where the compiler measures them, the one holding the fewest device bytes among those
placing the outputs alike. Checking is the caller's (:class:`~offload_fixer.verify.stage.Verifier`):
this module knows no JAX."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from offload_fixer.fixes.planner import FixPlan
from offload_fixer.model import byte_size


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


def choose(
    options: Sequence[Sequence[FixPlan]],
    check: Callable[[Sequence[FixPlan]], Trial],
    rank: bool = False,
) -> Choice:
    """The plans to write for one file: root cause by root cause, each candidate checked with
    the plans already chosen (the root causes not yet reached left unfixed; the last check is of
    the whole chosen set, so its figures are the fix's); the first valid one (``check`` says
    what valid is: it lowers, the analysis of the fixed lowering keeps none of what it claims,
    and where the compiler is installed it compiles). With ``rank`` (the compiler installed:
    every candidate is compiled), up to :data:`RANKED` candidates of a root
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
    if whole is not None and whole.ok:
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
            if best is None:
                best = (plan, trial)
            if rank and len(plans) > 1:
                continue  # the candidates (up to RANKED) compiled, then compared
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
                why = failed[0][1] if failed else "the first does not hold"
            replaced.append((plans[0], plan, why))
    return Choice(tuple(accepted), last if accepted else None, tuple(left), tuple(replaced), tuple(ranked))


def _reasons(failed: Sequence[tuple[FixPlan, str]], first: FixPlan) -> str:
    """Why each candidate failed, once each: the first (whose title the finding's mark
    already gives) by its reason alone, the others named; a reason they all share (the fixed
    file cannot be imported to verify any of them) once."""
    if len({why for _, why in failed}) == 1:
        return failed[0][1]
    return "; ".join(why if plan is first else f"{plan.title}: {why}" for plan, why in failed)
