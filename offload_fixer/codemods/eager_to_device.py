"""Move a host array to device before an eager operation on it (code outside any jit).

An eager ``trajectory[::40, 0]``, ``x[16, 0]`` or ``x.mean()`` of an array in host memory is
one of JAX's own jits, compiled alone: a strided slice copied to device (OFL1213), host
compute (OFL1201) or a host value JAX declares device memory (OFL1200). No jit of the user's
can be edited; the fix is at the user's eager line: the operand is moved to device first,
``jax.device_put(trajectory, jax.memory.Space.Device)[::40, 0]``, and the operation runs on
device. The whole operand reaches device memory (the move copies it; the host array stays).

The target is the operation's span as the diagnostic gives it (``--eager-line``,
``--eager-col``, ``--eager-end-col``: 1-based, the end exclusive) and which of its operands
is the host array (``--operand-index``: a subscript's or a method call's value is 0, a
function's positional arguments count from 0, a binary operation's left is 0). It edits
nothing where the JAX version has no ``jax.memory.Space`` (before 0.7.1 a move to device is
spelled with a sharding, which eager code has none of), where the span is no operation, or
where the operand is moved to device already. Eager code may be a module's statement: no
function is needed.

    python -m libcst.tool codemod --no-format eager_to_device.EagerToDeviceCommand run.py --eager-line 54 --eager-col 38
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

from offload_fixer.codemods.fix_command import ShardingCommand
from offload_fixer.codemods.source_facts import FunctionInfo
from offload_fixer.codemods.targets import FunctionTarget, HostValueTarget, Placement
from offload_fixer.codes import HOST_COMPUTE_CODES, HOST_SLICE_IN_SEVERAL_DIMENSIONS, HOST_VALUE_DEVICE_OUTPUT

OPERATIONS = (cst.Subscript, cst.Call, cst.BinaryOperation, cst.UnaryOperation)
"""The expressions an eager operation on an array is written as."""


@dataclass(frozen=True)
class EagerTarget(HostValueTarget):
    """The eager operation (its span) and which of its operands is the host array."""

    eager_line: int | None = None
    eager_col: int | None = None
    eager_end_col: int | None = None
    operand_index: int = 0


class EagerToDeviceCommand(ShardingCommand):
    DESCRIPTION = "Move a host array to device before an eager operation on it."
    STRATEGY = "device"
    FIXES: ClassVar[Mapping[Placement, frozenset[str]]] = {
        "eager": frozenset({HOST_VALUE_DEVICE_OUTPUT, HOST_SLICE_IN_SEVERAL_DIMENSIONS, *HOST_COMPUTE_CODES})
    }
    NEEDS_FUNCTION = False
    TARGET: ClassVar[type[FunctionTarget]] = EagerTarget
    target: EagerTarget

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        ShardingCommand.add_args(arg_parser)
        arg_parser.add_argument("--eager-line", type=int, help="line of the eager operation")
        arg_parser.add_argument("--eager-col", type=int, help="its 1-based column")
        arg_parser.add_argument("--eager-end-col", type=int, help="the 1-based column after it, on its last line")
        arg_parser.add_argument("--operand-index", type=int, default=0, help="which operand is the host array")

    def plan(self, function: FunctionInfo | None) -> None:
        del function  # eager code: the line alone says where
        target = self.target
        if target.eager_line is None or target.eager_col is None:
            self.report_problem("no eager operation given (--eager-line, --eager-col)")
            return
        space = self.spelling.memory_space
        if space is None:
            self.report_problem(
                f"JAX {self.spelling.version} has no jax.memory.Space to move an eager operand to device with"
            )
            return
        operation = self._operation(target.eager_line, target.eager_col, target.eager_end_col)
        if operation is None:
            self.report_problem(f"no operation on an array at line {target.eager_line}, column {target.eager_col}")
            return
        operand = _operand(operation, target.operand_index, self.facts.aliases.imported)
        if operand is None:
            self.report_problem(
                f"the operation at line {target.eager_line} has no operand {target.operand_index} to move"
            )
            return
        if self.is_device_move(operand, self.facts.module_scope):
            self.already(f"{self.code(operand)} on line {target.eager_line} is moved to device")
            return
        spec = self.parse(self.jax_module() + space.device.removeprefix("jax"))
        callee = self.parse(self.device_put_callee())

        def wrap(updated: cst.CSTNode) -> cst.CSTNode:
            """``device_put(x, Space.Device)``; the operand's parentheses go around the call."""
            assert isinstance(updated, cst.BaseExpression)
            return cst.Call(
                func=callee.deep_clone(),
                args=[
                    cst.Arg(
                        updated.with_changes(lpar=[], rpar=[]),
                        comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                    ),
                    cst.Arg(spec.deep_clone()),
                ],
                lpar=updated.lpar,
                rpar=updated.rpar,
            )

        name = self.code(operand)
        if self.claim(operand, wrap):
            self.record(operand, f"move {name} to device before the eager operation on it", [], name)

    def _operation(self, line: int, col: int, end_col: int | None) -> cst.BaseExpression | None:
        """The outermost operation starting at (``line``, ``col``), ending at ``end_col`` where
        given (``trajectory`` and ``trajectory[::40, 0]`` start alike)."""
        found: list[tuple[int, cst.BaseExpression]] = []
        positions = self.facts.positions
        for node, where in positions.items():
            if not isinstance(node, OPERATIONS) or where.start.line != line or where.start.column + 1 != col:
                continue
            if end_col is not None and where.end.column + 1 != end_col:
                continue
            found.append((where.end.line * 100_000 + where.end.column, node))
        return max(found, key=lambda item: item[0])[1] if found else None


def _operand(operation: cst.BaseExpression, index: int, imported: Mapping[str, str]) -> cst.BaseExpression | None:
    """The operation's ``index``-th array operand: a subscript's value; a method's receiver
    (0) then its arguments; a module function's (``jnp.mean(x)``) positional arguments."""
    if isinstance(operation, cst.Subscript):
        return operation.value if index == 0 else None
    if isinstance(operation, cst.BinaryOperation):
        return (operation.left, operation.right)[index] if index < 2 else None
    if isinstance(operation, cst.UnaryOperation):
        return operation.expression if index == 0 else None
    assert isinstance(operation, cst.Call)
    positional = [arg.value for arg in operation.args if not arg.keyword and not arg.star]
    func = operation.func
    if isinstance(func, cst.Attribute) and not _names_module(func.value, imported):
        operands = [func.value, *positional]
    else:
        operands = positional
    return operands[index] if index < len(operands) else None


def _names_module(expr: cst.BaseExpression, imported: Mapping[str, str]) -> bool:
    """``jnp`` in ``jnp.mean(x)``, ``jax.numpy``: a module an import binds, not an array."""
    head = expr
    while isinstance(head, cst.Attribute):
        head = head.value
    return isinstance(head, cst.Name) and head.value in imported
