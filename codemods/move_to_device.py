"""Codemod: move a host value back to device memory before it leaves a jitted function.

Placements:

* ``return`` — wrap the offending output where it is returned (or in the ``name = ...``
  assignment a returned name refers to, when the path goes into it), in every return of the
  function (or the ``--return-line`` ones);
* ``entry`` — rebind a streamed (host) parameter as the function's first statement, which
  fixes every output it reaches and keeps computation off host memory;
* ``after_origin`` — rebind the value right after the statement that moved it to host, for
  host values that go through computation before they are returned.

Spelling (``--spelling-api``): ``jax.device_put(x, jax.memory.Space.Device)`` for JAX >= 0.7.1;
for 0.4.25 - 0.7.0 a concrete sharding with ``memory_kind="device"``: the move to host's own
sharding re-kinded, else the host argument's ``in_shardings`` entry re-kinded, else
``TransferToMemoryKind("device")`` when the file imports it, else (unsafe, single device)
``SingleDeviceSharding(jax.devices()[0], memory_kind="device")``.

    python -m libcst.tool codemod move_to_device.MoveToDeviceCommand train.py \\
        --function-line 12 --output-path "[1]" --no-format
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import libcst as cst
from libcst.codemod import CodemodContext

from codemods import sharding_exprs as sx
from codemods.fix_command import FixCommand
from codemods.pytree_source import (
    drop_covered,
    locate,
    parenthesized_if_tuple,
    returned_values,
)
from codemods.source_facts import FunctionInfo, Scope
from codemods.targets import FixTarget, format_path, parse_path

ENTRY_NOTE = (
    "the argument is on device for the whole function, as its device outputs and the compute "
    "on it require; the slow host compute XLA would otherwise insert goes away"
)
AFTER_ORIGIN_REASON = (
    "copies the offloaded value back to device right after it was moved to host: it occupies "
    "device memory from there on, undoing the offload for the rest of the function"
)
SINGLE_DEVICE_REASON = (
    "no sharding in scope to derive this one from: jax.devices()[0] assumes a single-device program"
)


class MoveToDeviceCommand(FixCommand):
    DESCRIPTION = "Move host values back to device memory before a jitted function returns them (XLA error 1200)."

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        FixCommand.add_args(arg_parser)
        arg_parser.add_argument("--placement", choices=["return", "entry", "after_origin"], default="return")

    def __init__(self, context: CodemodContext, target: FixTarget | None = None,
                 targets: Sequence[FixTarget] = (), **options: object) -> None:
        super().__init__(context, target, targets, **options)
        self.insertions: dict[cst.IndentedBlock, list[tuple[int, cst.BaseStatement]]] = {}

    def plan(self, function: FunctionInfo) -> None:
        placement = self.target.placement
        if placement == "entry":
            self._at_entry(function)
        elif placement == "after_origin":
            self._after_origin(function)
        else:
            self._at_returns(function)

    # ------------------------------------------------------------------ placements
    def _at_returns(self, function: FunctionInfo) -> None:
        returns = returned_values(function, self.target.return_lines)
        if not returns:
            self.report_problem(f"{function.name} has no return with a value to move to device")
            return
        paths = drop_covered([parse_path(p) for p in self.target.output_paths])
        for line, value in returns:
            for keys in paths:
                located = locate(self.facts, function.scope, value, keys)
                node = located.node
                label = _label(keys)
                if sx.is_device_move(node, self.facts.aliases):
                    self.already(f"{label} is already moved to device (line {self.facts.line(node)})")
                    continue
                spec = self.device_spec(function, function.scope, line)
                if not self.claim(node, self._wrapper(spec[0])):
                    continue
                reasons = list(spec[1])
                if located.rest:
                    reasons.insert(0, f"the source does not show where {label} is inside `{self.code(node)}`, "
                                      "so every array in it moves to device")
                where = "its assignment" if located.through_name else "the return"
                self.record(node, f"move {label} back to device at {where}: "
                                  f"{self.device_put_callee()}({self.code(node)}, {self.code(spec[0])})", reasons)

    def _at_entry(self, function: FunctionInfo) -> None:
        name = self._parameter(function)
        if name is None:
            self.report_problem(f"cannot tell which parameter of {function.name} is the host argument")
            return
        body = function.node.body
        if not isinstance(body, cst.IndentedBlock):
            self.report_problem(f"{function.name} is a one-line function; cannot add a statement to it")
            return
        start = 1 if body.body and _is_docstring(body.body[0]) else 0
        for statement in body.body[start:]:
            moved = self._moved_name(statement)
            if moved is None:
                break
            if moved == name:
                self.already(f"{name} is already moved to device on entry")
                return
        spec, spec_reasons = self.device_spec(function, function.scope, function.body_line)
        statement = self._rebind(name, spec)
        self.insert(body, start, statement)
        self.record(function.node.name, f"move argument {name} to device where {function.name} starts "
                                        f"({ENTRY_NOTE}): {self.code(statement).strip()}", spec_reasons)

    def _after_origin(self, function: FunctionInfo) -> None:
        t = self.target
        found = self.facts.device_put_at(t.origin_line, t.origin_col) if t.origin_line else None
        held = self.facts.statement_of(found[0], function) if found else None
        name = _assigned_name(held[0]) if held else None
        if held is None or name is None:
            self.report_problem(f"no `name = device_put(...)` statement for the move to host at line {t.origin_line} in {function.name}")
            return
        origin_statement, block = held
        position = next(i for i, s in enumerate(block.body) if s is origin_statement)
        following = block.body[position + 1] if position + 1 < len(block.body) else None
        if following is not None and self._moved_name(following) == name:
            self.already(f"{name} is already moved back to device after line {t.origin_line}")
            return
        spec, spec_reasons = self.device_spec(function, function.scope, self.facts.line(origin_statement) + 1)
        statement = self._rebind(name, spec)
        self.insert(block, position + 1, statement)
        self.record(origin_statement, f"move {name} back to device before it is computed on: "
                                      f"{self.code(statement).strip()}", [AFTER_ORIGIN_REASON, *spec_reasons])

    # ------------------------------------------------------------------ spelling
    def device_spec(self, function: FunctionInfo, scope: Scope, line: int) -> tuple[cst.BaseExpression, list[str]]:
        """The second argument of the move to device, and why it is unsafe if it is."""
        if self.spelling.api == "memory_space":
            return self.parse(f"{self.jax_module()}.memory.Space.Device"), []
        kind, quote = self.spelling.device_kind, self.facts.quote
        sources = []
        origin = self.origin_destination(function)
        if origin is not None:
            sources.append(origin)
        host_input = self.host_in_sharding(function)
        if host_input is not None:
            sources.append((host_input[0], host_input[1].scope))
        for source, written_in in sources:
            if sx.is_memory_space(source) or not self.facts.portable(source, written_in, scope, line):
                continue
            derived = sx.with_memory_kind(source.deep_clone(), kind, quote)
            if derived is not None:
                return derived, []
        if self.facts.aliases.transfer_to_memory_kind:
            name = self.facts.aliases.transfer_to_memory_kind[0]
            return self.parse(f"{name}({quote}{kind}{quote})"), []
        return self.single_device_sharding(kind), [SINGLE_DEVICE_REASON]

    def insert(self, block: cst.IndentedBlock, index: int, statement: cst.BaseStatement) -> None:
        """Insert ``statement`` before ``block.body[index]``; several targets may insert into
        one block in the same run (one streamed parameter each, say)."""
        pending = self.insertions.setdefault(block, [])
        if any(at == index and new.deep_equals(statement) for at, new in pending):
            return
        pending.append((index, statement))
        if len(pending) == 1:
            self.rewrites[block] = lambda updated: updated.with_changes(body=_with_inserted(updated.body, pending))

    def _wrapper(self, spec: cst.BaseExpression):
        callee = self.parse(self.device_put_callee())

        def wrap(updated: cst.CSTNode) -> cst.CSTNode:
            assert isinstance(updated, cst.BaseExpression)
            return cst.Call(
                func=callee.deep_clone(),
                args=[
                    cst.Arg(parenthesized_if_tuple(updated), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                    cst.Arg(spec.deep_clone()),
                ],
            )

        return wrap

    def _rebind(self, name: str, spec: cst.BaseExpression) -> cst.BaseStatement:
        text = f"{name} = {self.device_put_callee()}({name}, {self.code(spec)})\n"
        return cst.parse_statement(text, config=self.facts.module.config_for_parsing)

    def _moved_name(self, statement: cst.BaseStatement) -> str | None:
        """``name`` for a statement ``name = device_put(name, <device>)``."""
        name = _assigned_name(statement)
        if name is None:
            return None
        assert isinstance(statement, cst.SimpleStatementLine)
        value = statement.body[0].value  # type: ignore[union-attr]
        if sx.is_device_move(value, self.facts.aliases):
            moved = sx.moved_value(value)
            if isinstance(moved, cst.Name) and moved.value == name:
                return name
        return None

    def _parameter(self, function: FunctionInfo) -> str | None:
        t = self.target
        names = [*function.positional_params,
                 *(p.name.value for p in function.node.params.kwonly_params)]
        if t.parameter in names:
            return t.parameter
        if t.parameter_index is not None and t.parameter_index < len(function.positional_params):
            return function.positional_params[t.parameter_index]
        return None


def _with_inserted(body: Sequence[cst.BaseStatement], pending: list[tuple[int, cst.BaseStatement]]) -> list[cst.BaseStatement]:
    out: list[cst.BaseStatement] = []
    for index, statement in enumerate(body):
        out.extend(new for at, new in pending if at == index)
        out.append(statement)
    out.extend(new for at, new in pending if at >= len(body))
    return out


def _assigned_name(statement: cst.CSTNode) -> str | None:
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return None
    small = statement.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
        return small.targets[0].target.value
    if isinstance(small, cst.AnnAssign) and small.value is not None and isinstance(small.target, cst.Name):
        return small.target.value
    return None


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _label(keys: tuple) -> str:
    return f"output {format_path(keys)}" if keys else "the result"
