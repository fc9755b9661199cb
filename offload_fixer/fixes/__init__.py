"""Fixes for host values that reach device outputs (OFL1200): plan, then apply.

    plans = plan_fixes(report, strategy="auto")        # Diagnostic -> FixPlan
    results = apply_plans(plans, write=False)          # per file: old/new text, diff
    shown = fix_options(plan_alternatives(diagnostics), diagnostics)  # fixes a finding can get

The edits themselves are libcst codemods in :mod:`offload_fixer.codemods`; the rules
for choosing a strategy, the safety labels and how shardings are derived are in README.md.
"""

from offload_fixer.fixes.apply import FileResult, apply_plans
from offload_fixer.fixes.errors import (
    FixError,
    FixNotConvergedError,
    FixVerificationError,
    ReadOnlySourceError,
    SourceChangedError,
    SourceEncodingError,
    SourceReadError,
    SourceSyntaxError,
)
from offload_fixer.fixes.plan_options import fix_options, plan_alternatives
from offload_fixer.fixes.plan_words import choose_strategy
from offload_fixer.fixes.planner import FIXABLE_CODES, FixPlan, plan_fixes

__all__ = [
    "FIXABLE_CODES",
    "FileResult",
    "FixError",
    "FixNotConvergedError",
    "FixPlan",
    "FixVerificationError",
    "ReadOnlySourceError",
    "SourceChangedError",
    "SourceEncodingError",
    "SourceReadError",
    "SourceSyntaxError",
    "apply_plans",
    "choose_strategy",
    "fix_options",
    "plan_alternatives",
    "plan_fixes",
]
