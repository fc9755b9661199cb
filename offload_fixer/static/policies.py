"""Offload policies that offload nothing: ``offload_dst="unpinned_host"`` (the OFL1204 trap).

A remat policy built with ``save_and_offload_only_these_names(..., offload_dst="unpinned_host")``,
``offload_dot_with_no_batch_dims(..., "unpinned_host")`` or ``Offloadable(dst="unpinned_host")``
leaves no move in the lowered module (JAX treats the destination as device memory), so only
the source shows it: the residuals stay on device and the memory saving silently vanishes.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from offload_fixer import codes
from offload_fixer.model import UNPINNED_HOST, Diagnostic, Span
from offload_fixer.rules import get_rule
from offload_fixer.rules.ofl1204 import PIN_HOST_MEMORY, UNPINNED_POLICY
from offload_fixer.source.offload_policies import policy_destinations

from .source import ParsedSource


def unpinned_policies(
    parsed: ParsedSource, text: str, path: str, target: str, source_sha256: str | None
) -> list[Diagnostic]:
    if UNPINNED_HOST not in text:  # the common case costs one substring search
        return []
    found: list[cst.BaseExpression] = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.extend(value for value in policy_destinations(node) if _is_unpinned(value))

    parsed.module.visit(Finder())
    rule = get_rule(codes.UNPINNED_HOST_MEMORY)
    out = []
    for literal in found:
        where = parsed.code_range(literal)
        span = Span(path, where.start.line, where.start.column + 1, where.end.line, where.end.column + 1)
        out.append(
            Diagnostic(
                code=rule.code,
                severity="warning",
                target=target,
                message=UNPINNED_POLICY.format(),
                explanation=(
                    "An offload policy (or Offloadable) whose destination is 'unpinned_host' lowers to no "
                    "move at all, so the residuals it should offload stay in device memory and the "
                    "saving it was written for silently disappears. Use 'pinned_host'."
                ),
                span=span,
                fixes=(rule.fix_option("host", PIN_HOST_MEMORY.format()),),
                source="static",
                source_sha256=source_sha256,
            )
        )
    return out


def _is_unpinned(value: Any) -> bool:
    return isinstance(value, cst.SimpleString) and value.evaluated_value == UNPINNED_HOST
