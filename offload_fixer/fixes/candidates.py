"""Candidate plans for each root cause, best first: the configured strategy's plan, its wider
variant (a scanned stack moved whole where the function starts, not slice by slice), then,
under ``auto``, the ``host`` strategy's plans (never the ``device`` strategy's, which return
what the author keeps in host memory in device memory: only ``--strategy device`` asks that). The verification stage
(:mod:`offload_fixer.verify`) checks them in this order and writes the first that holds; this
module knows no JAX.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from offload_fixer.findings import root_cause_key
from offload_fixer.fixes.plan_sources import Sources
from offload_fixer.fixes.planner import FixPlan, plan_fixes
from offload_fixer.model import FIX_STRATEGIES, Diagnostic


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
    ``strategy``'s, its wider variant, and under ``auto`` the ``host`` strategy's (an explicit
    strategy is never swapped for another). ``eligible``: which plans may be written at all
    (safe ones, unsafe ones with ``--unsafe-fixes``). ``sources``: as for :func:`plan_fixes`;
    the runs share them either way, so each file is parsed once for all of them."""
    reports = list(reports)
    sources = Sources(texts or {}) if sources is None else sources
    runs = [(strategy, True), (strategy, False)]
    if strategy == "auto":  # never the device strategy's: it returns what the author keeps on host in device memory
        runs += [(other, narrow) for other in FIX_STRATEGIES if other != "device" for narrow in (True, False)]
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
