"""Spell ``"pinned_host"`` where a move to host says ``"unpinned_host"`` (the OFL1204 trap).

JAX >= 0.7.1 types an ``unpinned_host`` move as device memory while XLA moves the value to
host, so a returned value fails with error 1200; with ``"pinned_host"`` the value is typed host
and the output follows it (JAX 0.4.29 - 0.7.0 propagate it too). The command finds the
``device_put`` at ``--origin-line`` and replaces the ``"unpinned_host"`` literal in its
destination: written in the call, or in the one assignment of the name the call uses (unsafe
when that name is used anywhere else too, since every use changes). Without a ``device_put``
there, a remat offload policy's ``offload_dst="unpinned_host"`` (``Offloadable(dst=...)``,
``offload_dot_with_no_batch_dims(..., "unpinned_host")``) on that line is respelled: such a
policy offloads nothing, since JAX treats the destination as device memory. So is a policy's
``"device"`` destination (OFL1211: the residuals are in device memory already), found on the
line or through the name a ``policy=`` argument there reads. A policy may sit at module
level: no function is needed then.

    python -m libcst.tool codemod --no-format pin_host_memory.PinHostMemoryCommand train.py --origin-line 12
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

from offload_fixer.codemods.fix_command import FixCommand
from offload_fixer.codemods.source_facts import FunctionInfo
from offload_fixer.codemods.targets import FunctionTarget, Placement
from offload_fixer.codes import UNPINNED_HOST_MEMORY
from offload_fixer.model import DEVICE
from offload_fixer.model import PINNED_HOST as PINNED
from offload_fixer.model import UNPINNED_HOST as UNPINNED
from offload_fixer.source.offload_policies import NO_OFFLOAD_DESTINATIONS, policy_destinations

SHARED_REASON = "the sharding variable is used elsewhere too: every use moves to pinned_host memory"


@dataclass(frozen=True)
class PinTarget(FunctionTarget):
    """The move to host (or the offload policy) whose ``'unpinned_host'`` is respelled."""

    origin_line: int | None = None
    origin_col: int | None = None


class PinHostMemoryCommand(FixCommand):
    DESCRIPTION = "Use memory_kind='pinned_host' where a move to host or an offload policy says 'unpinned_host'."
    STRATEGY = "host"
    FIXES: ClassVar[Mapping[Placement, frozenset[str]]] = {"pin_memory": frozenset({UNPINNED_HOST_MEMORY})}
    NEEDS_FUNCTION = False
    TARGET: ClassVar[type[FunctionTarget]] = PinTarget
    target: PinTarget

    def plan(self, function: FunctionInfo | None) -> None:
        target = self.target
        if target.origin_line is None:
            self.report_problem("no move to host given (--origin-line)")
            return
        found = self.facts.device_put_at(target.origin_line, target.origin_col)
        if found is None:
            self._pin_policy(target.origin_line)
            return
        call, scope = found
        destination = _destination(call)
        if destination is None:
            self.report_problem(f"the device_put on line {target.origin_line} names no destination")
            return
        reasons: list[str] = []
        literals = _kind_literals(destination)
        if not literals and isinstance(destination, cst.Name):
            bound = self.facts.scope_chain_binding(destination.value, scope)
            if bound is not None and bound[0].value is not None:
                literals = _kind_literals(bound[0].value)
                if self.facts.references(destination.value) > 2:  # the assignment and this use
                    reasons.append(SHARED_REASON)
        unpinned = [node for node in literals if node.evaluated_value == UNPINNED]
        if not unpinned:
            if any(node.evaluated_value == PINNED for node in literals):
                self.already(f"the move on line {target.origin_line} is pinned_host already")
            else:
                self.report_problem(f"the destination of the move on line {target.origin_line} spells no memory kind")
            return
        for node in unpinned:
            if self.claim(node, _respelled):
                self.record(
                    node,
                    f"memory kind 'unpinned_host' -> 'pinned_host' for the move on line {target.origin_line}",
                    reasons,
                    "'unpinned_host'",
                )

    def _pin_policy(self, line: int) -> None:
        literals = self._policy_destinations(line)
        respelled = [node for node in literals if node.evaluated_value in NO_OFFLOAD_DESTINATIONS]
        if not respelled:
            if any(node.evaluated_value == PINNED for node in literals):
                self.already(f"the offload destination on line {line} is pinned_host already")
            else:
                self.report_problem(f"no device_put or offload policy destination on line {line}")
            return
        for node in respelled:
            kind = str(node.evaluated_value)
            if self.claim(node, _respelled):
                self.record(
                    node,
                    f"offload destination {kind!r} -> 'pinned_host' on line {self.facts.line(node)} (a policy "
                    f"that offloads to {kind} offloads nothing)",
                    [],
                    repr(kind),
                )

    def _policy_destinations(self, line: int) -> list[cst.SimpleString]:
        """The literal destinations of offload policies written on ``line``, else those of the
        policies called there, else of the one policy a name there is bound to
        (``jax.checkpoint(f, policy=policy)``), else of the file's one policy to device memory
        (``run`` reports such a policy where a value it offloads is tagged)."""
        facts = self.facts
        policies: dict[cst.Call, list[cst.SimpleString]] = {}
        names: list[str] = []

        class Finder(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                literals = [value for value in policy_destinations(node) if isinstance(value, cst.SimpleString)]
                if literals:
                    policies[node] = literals
                names.extend(
                    arg.value.value
                    for arg in node.args
                    if isinstance(arg.value, cst.Name) and facts.line(arg.value) == line
                )

        facts.module.visit(Finder())
        on_line = [value for literals in policies.values() for value in literals if facts.line(value) == line]
        if on_line:
            return on_line
        called = [call for call in policies if facts.line(call) == line]
        if not called:
            bound = (facts.scope_chain_binding(name, facts.module_scope) for name in dict.fromkeys(names))
            values = (b[0].value for b in bound if b is not None)
            called = [value for value in values if isinstance(value, cst.Call) and value in policies]
        if not called:
            to_device = [
                call for call, literals in policies.items() if any(v.evaluated_value == DEVICE for v in literals)
            ]
            called = to_device if len(to_device) == 1 else []
        return [value for call in called for value in policies[call]]


def _destination(call: cst.Call) -> cst.BaseExpression | None:
    """``device_put(x, dst)`` / ``device_put(x, device=dst)``."""
    for index, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value in ("device", "dst"):
            return arg.value
        if arg.keyword is None and index == 1:
            return arg.value
    return None


def _kind_literals(expr: cst.BaseExpression) -> list[cst.SimpleString]:
    """Memory-kind strings in a sharding expression: ``memory_kind=`` arguments and
    ``with_memory_kind(...)`` arguments."""
    found: list[cst.SimpleString] = []

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            is_with = isinstance(node.func, cst.Attribute) and node.func.attr.value == "with_memory_kind"
            for arg in node.args:
                keyword = arg.keyword.value if arg.keyword is not None else None
                if (keyword == "memory_kind" or (is_with and keyword is None)) and isinstance(
                    arg.value, cst.SimpleString
                ):
                    found.append(arg.value)

    expr.visit(Visitor())
    return found


def _respelled(node: cst.CSTNode) -> cst.CSTNode:
    assert isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str)
    return node.with_changes(value=node.value.replace(node.evaluated_value, PINNED))
