"""Codemod: move a host value back to device memory before it leaves a jitted function.

Placements:

* ``return`` — wrap the offending output where it is returned (or in the ``name = ...``
  assignment a returned name refers to, when the path goes into it), in every return of the
  function (or the ``--return-line`` ones);
* ``entry`` — rebind a streamed (host) parameter as the function's first statement, which
  fixes every output it reaches and keeps computation off host memory (narrowed: each slice in
  the body of a scan over it, the one slice the function reads of it, the host leaves where
  they are read);
* ``after_origin`` — rebind the value right after the statement that moved it to host, for
  host values that go through computation before they are returned.

Spelling (``--jax-version``): ``jax.device_put(x, jax.memory.Space.Device)`` for JAX >= 0.7.1;
for 0.4.25 - 0.7.0 a concrete sharding with ``memory_kind="device"``: the move to host's own
sharding re-kinded, else the host argument's ``in_shardings`` entry re-kinded, else
``TransferToMemoryKind("device")`` when the file imports it, else (unsafe, single device)
``SingleDeviceSharding(jax.devices()[0], memory_kind="device")``.

    python -m libcst.tool codemod move_to_device.MoveToDeviceCommand train.py \\
        --function-line 12 --output-path "[1]" --no-format

Over 500 lines on purpose: one codemod, whose placements (return, entry, operand, after the
origin) share the function being rewritten and the spelling of the move.
"""

from __future__ import annotations

import argparse
import keyword
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import libcst as cst
from libcst.codemod import CodemodContext

from offload_fixer.codemods import sharding_exprs as sx
from offload_fixer.codemods.fix_command import FixCommand, Rewrite, ShardingCommand
from offload_fixer.codemods.host_output import HostOutputTarget
from offload_fixer.codemods.pytree_source import (
    drop_covered,
    locate,
    parenthesized_if_tuple,
    returned_values,
)
from offload_fixer.codemods.reads import Read, leaf_part, reads_of
from offload_fixer.codemods.source_facts import TRANSFER_TO_MEMORY_KIND, FunctionInfo, Scope
from offload_fixer.codemods.targets import FunctionTarget, Placement
from offload_fixer.codes import HOST_COMPUTE_CODES, HOST_VALUE_DEVICE_OUTPUT
from offload_fixer.model import PathKey, format_output_path, parse_output_path
from offload_fixer.source.bindings import last_name, target_name_nodes

ENTRY_NOTE = (
    "the argument is on device for the whole function, as its device outputs and the compute "
    "on it require; the slow host compute XLA would otherwise insert goes away"
)
AFTER_ORIGIN_REASON = (
    "copies the offloaded value back to device right after it was moved to host: it occupies "
    "device memory from there on, undoing the offload for the rest of the function"
)


PLACEMENT_FLAGS: Mapping[str, Mapping[str, str]] = {
    "--origin-line": {"operand": "the line of the move to host", "after_origin": "the line of the move to host"},
    "--compute-line": {"operand": "a line that computes on the moved value"},
}
"""The flags a placement cannot go without, with what each gives it."""

MOVE_COVERS = frozenset({HOST_VALUE_DEVICE_OUTPUT, *HOST_COMPUTE_CODES})
"""A move to device before the computation fixes the host compute and the output it reaches."""


@dataclass(frozen=True)
class MoveToDeviceTarget(HostOutputTarget):
    """Besides the outputs: where the move goes (``placement``), and for each place what it
    needs: the host leaves of the parameter (``entry``), the computations on the host value
    (``operand``)."""

    placement: Placement = "return"
    narrow: bool = True
    """Move a stack the function only scans over slice by slice, in the scan's body; False: the
    whole argument where the function starts (the wider plan, tried when the narrow one fails)."""
    compute_spans: tuple[tuple[int, int], ...] = ()
    """(line, column) of computations on the host value: ``operand`` moves it to device there."""


class MoveToDeviceCommand(ShardingCommand):
    DESCRIPTION = "Move host values back to device memory before a jitted function returns them (XLA error 1200)."
    STRATEGY = "device"
    FIXES: ClassVar[Mapping[Placement, frozenset[str]]] = {
        "return": frozenset({HOST_VALUE_DEVICE_OUTPUT}),
        "entry": MOVE_COVERS,
        "operand": MOVE_COVERS,
        "after_origin": MOVE_COVERS,
    }
    TARGET: ClassVar[type[FunctionTarget]] = MoveToDeviceTarget
    target: MoveToDeviceTarget

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        FixCommand.add_args(arg_parser)
        arg_parser.add_argument(
            "--placement",
            choices=["return", "entry", "after_origin", "operand"],
            default="return",
            help="return: at the returned output; entry: the host parameter (--parameter, "
            "--parameter-leaf) where it is read; after_origin: right after the move to "
            "host; operand: where the moved value is computed on (--compute-line)",
        )

    def __init__(
        self,
        context: CodemodContext,
        target: MoveToDeviceTarget | None = None,
        targets: Sequence[MoveToDeviceTarget] = (),
        **options: Any,
    ) -> None:
        super().__init__(context, target, targets, **options)
        self.insertions: dict[cst.IndentedBlock, list[tuple[int, cst.BaseStatement]]] = {}

    def plan(self, function: FunctionInfo | None) -> None:
        assert function is not None, "NEEDS_FUNCTION"
        placement = self.target.placement
        needed = [
            flag
            for flag, given in (
                ("--origin-line", self.target.origin_line),
                ("--compute-line", self.target.compute_spans),
            )
            if placement in PLACEMENT_FLAGS.get(flag, ()) and not given
        ]
        if needed:
            what = " and ".join(f"{flag} ({PLACEMENT_FLAGS[flag][placement]})" for flag in needed)
            self.report_problem(f"--placement {placement} needs {what}")
            return
        if placement == "entry":
            self._at_entry(function)
        elif placement == "after_origin":
            self._after_origin(function)
        elif placement == "operand":
            self._at_operands(function)
        else:
            self._at_returns(function)

    # ------------------------------------------------------------------ placements
    def _at_returns(self, function: FunctionInfo) -> None:
        returns = returned_values(function, self.target.return_lines)
        if not returns:
            self.report_problem(f"{function.name} has no return with a value to move to device")
            return
        paths = drop_covered([parse_output_path(p) for p in self.target.output_paths])
        if not self.names_only_returned_parts(function, paths, self.target.return_lines):
            return
        for line, value in returns:
            for keys in paths:
                located = locate(self.facts, function.scope, value, keys)
                node = located.node
                label = _label(keys[: len(keys) - len(located.rest)])
                if self.is_device_move(node, function.scope):
                    self.already(f"{label} is already moved to device (line {self.facts.line(node)})")
                    continue
                spec = self.device_spec(function, function.scope, line)
                if spec is None or not self.claim(node, self._wrapper(spec[0])):
                    continue
                reasons = list(spec[1])
                if located.rest and not self._all_device_below(keys[: len(keys) - len(located.rest)]):
                    reasons.insert(
                        0,
                        f"the source does not show where {label} is inside `{self.code(node)}`, "
                        "so every array in it moves to device",
                    )
                where = "its assignment" if located.through_name else "the return"
                self.record(
                    node,
                    f"move {label} back to device at {where}: "
                    f"{self.device_put_callee()}({self.code(node)}, {self.code(spec[0])})",
                    reasons,
                    label,
                )

    def _all_device_below(self, prefix: tuple[PathKey, ...]) -> bool:
        """The analysis saw every output under ``prefix`` as device memory: moving all of the
        value there to device changes only the host leaves, which is the fix."""
        kinds = [kind for path, kind in self.target.output_kinds if parse_output_path(path)[: len(prefix)] == prefix]
        return bool(kinds) and not any(kind in sx.HOST_KINDS for kind in kinds)

    def _at_entry(self, function: FunctionInfo) -> None:
        name = self._parameter(function)
        if name is None:
            t = self.target
            given = (
                f"--parameter {t.parameter}"
                if t.parameter is not None
                else (f"--parameter-index {t.parameter_index}" if t.parameter_index is not None else None)
            )
            names = ", ".join(self._parameter_names(function)) or "none"
            self.report_problem(
                f"{given} names no parameter of {function.name} (its parameters: {names})"
                if given
                else f"cannot tell which parameter of {function.name} is the host argument: "
                "give --parameter or --parameter-index"
            )
            return
        body = function.node.body
        if not isinstance(body, cst.IndentedBlock):
            self.report_problem(f"{function.name} is a one-line function; cannot add a statement to it")
            return
        leaves = [parse_output_path(p) for p in self.target.parameter_leaves]
        if self.target.narrow and self._in_scan_bodies(function, name):
            return
        if self.target.narrow and not (leaves and all(leaves)) and self._at_the_one_slice(function, name):
            return
        why_whole = ""
        if leaves and all(leaves):
            why_whole = self._at_reads(function, body, name, leaves)
            if not why_whole:
                return
        start = 1 if body.body and _is_docstring(body.body[0]) else 0
        for statement in body.body[start:]:
            moved = self._moved_name(statement, function)
            if moved is None:
                break
            if moved == name:
                self.already(f"{name} is already moved to device on entry")
                return
        found = self.device_spec(function, function.scope, function.body_line)
        if found is None:
            return
        spec, spec_reasons = found
        statement = self._rebind(name, spec)
        self.insert(body, start, statement)
        whole = f"all of {name}, since {why_whole}; " if why_whole else ""
        self.record(
            body.body[start] if start < len(body.body) else function.node.name,
            f"move argument {name} to device where {function.name} starts (line {function.body_line}; "
            f"{whole}{ENTRY_NOTE}): {self.code(statement).strip()}",
            spec_reasons,
            f"argument {name}",
        )

    def _in_scan_bodies(self, function: FunctionInfo, name: str) -> bool:
        """A host stack only scanned over (``lax.scan(layer, h, name)``, every read of ``name``):
        each slice moved to device where the scan's body starts (``w = device_put(w, ...)``),
        so one layer at a time is in device memory, not the whole stack. False when a read of
        ``name`` is not such a scan's ``xs``, or a body is not a ``def`` of this file."""
        kept: list[cst.Name] = []
        found_scans = self._scans_of(function.node, name, depth=2, kept=kept)
        if found_scans is None:
            return False
        bodies = []
        for call, owner in found_scans:
            found = self._body_def(call, owner)
            if found is None or not isinstance(found.body, cst.IndentedBlock):
                return False
            params = found.params.params
            if len(params) < 2:
                return False
            bodies.append((found, params[1].name.value))
        for body_def, slice_name in dict.fromkeys(bodies):
            block = body_def.body
            assert isinstance(block, cst.IndentedBlock)
            start = 1 if block.body and _is_docstring(block.body[0]) else 0
            if start < len(block.body) and self._moved_name(block.body[start], function) == slice_name:
                self.already(f"each slice of {name} is already moved to device in {body_def.name.value}")
                continue
            made = self.device_spec(function, function.scope, self.facts.line(body_def))
            if made is None:
                continue
            spec, reasons = made
            statement = self._rebind(slice_name, spec)
            self.insert(block, start, statement)
            label = f"each slice of {name}"
            lines = sorted({self.facts.line(use) for use in kept})
            stays = (
                f"; its arithmetic on line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))} "
                f"stays in host memory (host compute)"
                if lines
                else ""
            )
            self.record(
                block.body[start] if start < len(block.body) else body_def.name,
                f"move {label} to device where the scan body {body_def.name.value} starts (line "
                f"{self.facts.line(body_def)}; one slice at a time is in device memory, not all of {name}"
                f"{stays}): {self.code(statement).strip()}",
                reasons,
                label,
                kept=lines,
            )
        return True

    def _at_the_one_slice(self, function: FunctionInfo, name: str) -> bool:
        """A host argument the function reads at one place only, as a slice of it
        (``lax.dynamic_index_in_dim(experts, i)``, ``lax.dynamic_slice(x, ...)``, ``x[0]``):
        that slice moved to device where it is read (``device_put(lax.dynamic_index_in_dim(
        experts, i), ...)``), so only the slice is in device memory, not all of ``name``: the
        narrowest point. Reads of its metadata (``name.shape``) move nothing. False otherwise
        (the whole argument then moves where the function starts: the wider candidate)."""
        uses = _name_uses(function.node.body, name)
        if not uses or any(is_store for _, is_store in uses):
            return False
        holders = _holders(function.node.body, name)
        reads = [use for use, _ in uses if not _metadata_read(holders.get(id(use)), use)]
        if len(reads) != 1:
            return False
        read = reads[0]
        sliced = _slice_of(holders.get(id(read)), read)
        if sliced is None:
            return False
        if any(self.is_device_move(call, function.scope) for call in _calls_with_argument(function.node.body, sliced)):
            self.already(f"the slice of {name} that {function.name} reads is already moved to device")
            return True
        made = self.device_spec(function, function.scope, self.facts.line(sliced))
        if made is None:
            return True  # the problem is reported: no sharding fits
        spec, reasons = made
        if not self.claim(sliced, self._wrapper(spec)):
            return True
        self.record(
            sliced,
            f"move the slice of {name} that {function.name} reads to device where it reads it (line "
            f"{self.facts.line(sliced)}; only that slice is in device memory, not all of {name}): "
            f"{self.device_put_callee()}({self.code(sliced)}, {self.code(spec)})",
            reasons,
            f"the slice of {name}",
        )
        return True

    def _scans_of(
        self, node: cst.FunctionDef, name: str, depth: int, kept: list[cst.Name] | None = None
    ) -> list[tuple[cst.Call, cst.FunctionDef]] | None:
        """The scans over parameter ``name`` of ``node`` when they are its only reads: directly,
        or through a module-level helper it is passed to (``forward(stack, x)`` whose ``stack``
        is only scanned over), ``depth`` levels down; None otherwise. With ``kept`` (the
        function itself, not a helper), an operand of arithmetic (``stack - 0.1 * grads``, an
        update of the stack kept in host memory) is a read too, collected there: it stays host
        compute, as the stack stays host memory."""
        uses = _name_uses(node.body, name)
        if not uses or any(is_store for _, is_store in uses):
            return None
        scans = _scans_over(node.body, name)
        direct = {id(xs) for _, xs in scans}
        arithmetic = _arithmetic_operands(node.body) if kept is not None else set()
        found = [(call, node) for call, _ in scans]
        for use, _ in uses:
            if id(use) in direct:
                continue
            if id(use) in arithmetic and kept is not None:
                kept.append(use)
                continue
            helper = self._helper_parameter(node, use) if depth > 1 else None
            if helper is None:
                return None
            inner = self._scans_of(helper[0], helper[1], depth - 1)
            if inner is None:
                return None
            found += inner
        return found or None

    def _helper_parameter(self, node: cst.FunctionDef, use: cst.Name) -> tuple[cst.FunctionDef, str] | None:
        """(def, parameter) when ``use`` is a plain positional argument of a call to a
        module-level ``def`` of this file: the parameter it binds."""
        for call in _calls_with_argument(node.body, use):
            called = _called_def(call.func)
            if called is None:
                continue
            helper = next((d for d in _defs(self.facts.module) if d.name.value == called), None)
            positional = [a for a in call.args if a.keyword is None and not a.star]
            index = next((i for i, a in enumerate(positional) if a.value is use), None)
            if helper is None or index is None or index >= len(helper.params.params):
                return None
            return helper, helper.params.params[index].name.value
        return None

    def _body_def(self, call: cst.Call, owner: cst.FunctionDef) -> cst.FunctionDef | None:
        """The ``def`` a scan's body argument names: nested in ``owner`` (the function that
        calls the scan) or at module level."""
        body = call.args[0].value if call.args and call.args[0].keyword is None else None
        if not isinstance(body, cst.Name):
            return None
        candidates = [*_defs(owner.body), *_defs(self.facts.module)]
        return next((d for d in candidates if d.name.value == body.value), None)

    def _at_reads(
        self, function: FunctionInfo, body: cst.IndentedBlock, name: str, leaves: list[tuple[PathKey, ...]]
    ) -> str:
        """Move only the host ``leaves`` of parameter ``name``, where the function reads them:
        ``leaf = device_put(name[...], ...)`` before the statement that first reads it (right
        after a sibling already moved that way, with the sibling's destination), the reads
        then use ``leaf``; in place when that name is taken. Returns why the whole parameter
        has to move instead, or "" when done."""
        found = reads_of(name, function.node.body, lambda call: self.is_device_move(call, function.scope))
        statements = list(body.body)
        last = len(statements) - 1
        for rebinding in found.rebound:
            index = self._top_index(statements, rebinding)
            if index is None or not isinstance(statements[index], cst.SimpleStatementLine):
                return f"it is assigned again inside a block (line {self.facts.line(rebinding)})"
            last = min(last, index)
        wanted: dict[tuple[PathKey, ...], list[cst.BaseExpression]] = {}
        first_read: dict[tuple[PathKey, ...], int] = {}
        moved: list[Read] = []
        for read in found.reads:
            index = self._top_index(statements, read.node)
            if index is None or index > last:
                continue
            part = leaf_part(read.path, leaves)
            if read.moved:
                moved.append(read)  # a sibling's move, or this leaf's own
                continue
            if part is None:
                continue
            if not part:
                return f"{function.name} uses it whole (line {self.facts.line(read.node)})"
            wanted.setdefault(part, []).append(read.at(part))
            first_read[part] = min(first_read.get(part, index), index)
        if not wanted:
            if any(leaf_part(read.path, leaves) is not None for read in moved):
                self.already(f"the host leaves of {name} are already moved to device where they are read")
                return ""
            return f"no read of its host leaves in {function.name} shows where they are used"
        sibling = self._sibling_move(statements, moved, last)
        reasons: list[str]
        for part, nodes in sorted(wanted.items(), key=lambda item: first_read[item[0]]):
            label = f"{name}{format_output_path(part)}"
            at = first_read[part]
            if sibling is not None and sibling[0] < at:
                at, spec, reasons = sibling[0] + 1, sibling[1], []
            else:
                made = self.device_spec(function, function.scope, self.facts.line(statements[at]))
                if made is None:
                    continue
                spec, reasons = made
            local = self._free_name(function, statements, part, first_read[part])
            if local is not None and _assigns_exactly(statements[first_read[part]], local, nodes):
                local = None  # ``opt = state["opt"]``, ``mu, nu = ...``: moved in place, never ``opt = opt``
            if local is None:
                for node in nodes:
                    if self.claim(node, self._wrapper(spec)):
                        self.record(
                            node,
                            f"move {label} to device where {function.name} reads it: "
                            f"{self.device_put_callee()}({self.code(node)}, {self.code(spec)})",
                            reasons,
                            label,
                        )
                continue
            statement = cst.parse_statement(
                f"{local} = {self.device_put_callee()}({self.code(nodes[0])}, {self.code(spec)})\n",
                config=self.facts.module.config_for_parsing,
            )
            if not all(self.claim(node, _to_name(local)) for node in nodes):
                continue
            self.insert(body, at, statement)
            beside = " beside its siblings" if sibling is not None and at == sibling[0] + 1 else ""
            self.record(
                statements[first_read[part]],
                f"move {label} to device{beside} before {function.name} reads "
                f"it (line {self.facts.line(statements[first_read[part]])}): {self.code(statement).strip()}",
                reasons,
                label,
            )
        return ""

    def _top_index(self, statements: Sequence[cst.BaseStatement], node: cst.CSTNode) -> int | None:
        """Index of the function-body statement that holds ``node``."""
        line = self.facts.line(node)
        for index, statement in enumerate(statements):
            where = self.facts.positions[statement]
            if where.start.line <= line <= where.end.line:
                return index
        return None

    def _sibling_move(
        self, statements: Sequence[cst.BaseStatement], moved: list[Read], last: int
    ) -> tuple[int, cst.BaseExpression] | None:
        """(index, destination) of the last ``x = device_put(param[...], dst)`` statement that
        already moves a sibling sub-tree, when the function has one."""
        best = None
        for read in moved:
            assert read.move is not None
            index = self._top_index(statements, read.move)
            destination = sx.device_put_destination(read.move)
            statement = statements[index] if index is not None else None
            if (
                index is not None
                and index <= last
                and destination is not None
                and _assigned_name(statement) is not None
                and statement.body[0].value is read.move  # type: ignore[union-attr]
                and (best is None or index > best[0])
            ):
                best = (index, destination)
        return best

    def _free_name(
        self, function: FunctionInfo, statements: Sequence[cst.BaseStatement], part: tuple[PathKey, ...], first: int
    ) -> str | None:
        """A local name for the moved sub-tree: its last key (``nu`` for ``opt_state["nu"]``),
        when the function neither uses that name before the statement that reads the sub-tree
        nor reads it in that statement, and reads it after only if that statement assigns it
        (so the new binding changes no other read), and it names no parameter."""
        kind, key = part[-1]
        local = str(key)
        if kind == "index" or not local.isidentifier() or keyword.iskeyword(local):
            return None
        params = function.node.params
        every = [
            *params.posonly_params,
            *params.params,
            *params.kwonly_params,
            *(p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)),
        ]
        if any(p.name.value == local for p in every):
            return None
        assigns_it = False
        for node, is_store in _name_uses(function.node.body, local):
            index = self._top_index(statements, node)
            if index is None or index < first or (index == first and not is_store):
                return None
            if index == first:
                assigns_it = True
            elif not is_store and not assigns_it:
                return None
        return local

    def _origin_assignment(
        self, function: FunctionInfo
    ) -> tuple[tuple[cst.SimpleStatementLine, cst.IndentedBlock] | None, str | None]:
        """The statement (and its block) holding the target's move to host, and the name it
        assigns the moved value to."""
        t = self.target
        found = self.facts.device_put_at(t.origin_line, t.origin_col) if t.origin_line else None
        held = self.facts.statement_of(found[0], function) if found else None
        return held, _assigned_name(held[0]) if held else None

    def _at_operands(self, function: FunctionInfo) -> None:
        """Wrap the offloaded name where a computation reads it (the compute then runs on
        device; the offloaded value itself stays on host for its other uses)."""
        t = self.target
        held, name = self._origin_assignment(function)
        if held is None or name is None:
            self.report_problem(
                f"the move to host at line {t.origin_line} is not assigned to a name in {function.name}"
            )
            return
        lines = sorted({line for line, _ in t.compute_spans if function.contains(line)})
        if not lines:
            self.report_problem(f"the computations on the offloaded value are not in {function.name}")
            return
        origin_line = self.facts.line(held[0])
        targets = []
        moved = False
        for read in reads_of(name, function.node.body, lambda call: self.is_device_move(call, function.scope)).reads:
            statement = self.facts.statement_of(read.node, function)
            if statement is None:
                continue
            where = self.facts.positions[statement[0]]
            if where.start.line <= origin_line or not any(where.start.line <= line <= where.end.line for line in lines):
                continue
            if read.moved:
                moved = True
            elif not read.path:
                targets.append(read.node)
        if not targets:
            if moved:
                self.already(f"{name} is already moved to device where it is computed on")
            else:
                self.report_problem(
                    f"no computation in {function.name} reads {name} on the lines the analysis names "
                    f"({', '.join(map(str, lines))})"
                )
            return
        for node in targets:
            line = self.facts.line(node)
            found = self.device_spec(function, function.scope, line)
            if found is None:
                continue
            spec, reasons = found
            if self.claim(node, self._wrapper(spec)):
                self.record(
                    node,
                    f"move {name} to device where it is computed on (line {line}): "
                    f"{self.device_put_callee()}({name}, {self.code(spec)})",
                    reasons,
                    name,
                )

    def _after_origin(self, function: FunctionInfo) -> None:
        t = self.target
        held, name = self._origin_assignment(function)
        if held is None or name is None:
            self.report_problem(
                f"no `name = device_put(...)` statement for the move to host at line {t.origin_line} in {function.name}"
            )
            return
        origin_statement, block = held
        position = next(i for i, s in enumerate(block.body) if s is origin_statement)
        following = block.body[position + 1] if position + 1 < len(block.body) else None
        if following is not None and self._moved_name(following, function) == name:
            self.already(f"{name} is already moved back to device after line {t.origin_line}")
            return
        found = self.device_spec(function, function.scope, self.facts.line(origin_statement) + 1)
        if found is None:
            return
        spec, spec_reasons = found
        statement = self._rebind(name, spec)
        self.insert(block, position + 1, statement)
        self.record(
            origin_statement,
            f"move {name} back to device before it is computed on: {self.code(statement).strip()}",
            [AFTER_ORIGIN_REASON, *spec_reasons],
            name,
        )

    # ------------------------------------------------------------------ spelling
    def device_spec(
        self, function: FunctionInfo, scope: Scope, line: int
    ) -> tuple[cst.BaseExpression, list[str]] | None:
        """The second argument of the move to device, and why it is unsafe if it is; None (a
        problem reported) when no sharding fits a multi-device program."""
        space = self.spelling.memory_space
        if space is not None:
            return self.parse(self.jax_module() + space.device.removeprefix("jax")), []
        kind, quote = self.spelling.device_kind, self.facts.quote
        sources = []
        origin = self.origin_destination(function)
        if origin is not None:
            sources.append(origin)
        host_input = self.host_in_sharding(function)
        if host_input is not None:
            sources.append((host_input[0], host_input[1].scope))
        for source, written_in in sources:
            source, written_in = self._transfer_call(source, written_in)
            if sx.is_memory_space(source) or not self.facts.portable(source, written_in, scope, line):
                continue
            derived = sx.with_memory_kind(source.deep_clone(), kind, quote)
            if derived is not None:
                return derived, []
        if self.facts.aliases.transfer_to_memory_kind:
            name = self.facts.aliases.transfer_to_memory_kind[0]
            return self.parse(f"{name}({quote}{kind}{quote})"), []
        return self.fallback_sharding(kind, scope, line, "the value moved", moves=True)

    def _transfer_call(self, source: cst.BaseExpression, written_in: Scope) -> tuple[cst.BaseExpression, Scope]:
        """A name bound once to ``TransferToMemoryKind(...)``: that call, respelled with the
        device kind (the object has no ``with_memory_kind``); any other source as it is."""
        if isinstance(source, cst.Name):
            found = self.facts.scope_chain_binding(source.value, written_in)
            value = found[0].value if found is not None else None
            if isinstance(value, cst.Call) and last_name(value.func) == TRANSFER_TO_MEMORY_KIND:
                return value, found[1]  # type: ignore[index]
        return source, written_in

    def insert(self, block: cst.IndentedBlock, index: int, statement: cst.BaseStatement) -> None:
        """Insert ``statement`` before ``block.body[index]``; several targets may insert into
        one block in the same run (one streamed parameter each, say)."""
        pending = self.insertions.setdefault(block, [])
        if any(at == index and new.deep_equals(statement) for at, new in pending):
            return
        pending.append((index, statement))
        if len(pending) == 1:

            def insert_pending(updated: cst.CSTNode) -> cst.CSTNode:
                assert isinstance(updated, cst.IndentedBlock)
                return updated.with_changes(body=_with_inserted(updated.body, pending))

            self.rewrites[block] = insert_pending

    def _wrapper(self, spec: cst.BaseExpression) -> Rewrite:
        callee = self.parse(self.device_put_callee())

        def wrap(updated: cst.CSTNode) -> cst.CSTNode:
            assert isinstance(updated, cst.BaseExpression)
            return cst.Call(
                func=callee.deep_clone(),
                args=[
                    cst.Arg(
                        parenthesized_if_tuple(updated), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                    ),
                    cst.Arg(spec.deep_clone()),
                ],
            )

        return wrap

    def _rebind(self, name: str, spec: cst.BaseExpression) -> cst.BaseStatement:
        text = f"{name} = {self.device_put_callee()}({name}, {self.code(spec)})\n"
        return cst.parse_statement(text, config=self.facts.module.config_for_parsing)

    def _moved_name(self, statement: cst.BaseStatement, function: FunctionInfo) -> str | None:
        """``name`` for a statement ``name = device_put(name, <device>)``."""
        name = _assigned_name(statement)
        if name is None:
            return None
        assert isinstance(statement, cst.SimpleStatementLine)
        assignment = statement.body[0]
        assert isinstance(assignment, (cst.Assign, cst.AnnAssign)) and assignment.value is not None
        value = assignment.value
        if isinstance(value, cst.Call) and self.is_device_move(value, function.scope):
            moved = sx.moved_value(value)
            if isinstance(moved, cst.Name) and moved.value == name:
                return name
        return None

    def _parameter_names(self, function: FunctionInfo) -> list[str]:
        return [*function.positional_params, *(p.name.value for p in function.node.params.kwonly_params)]

    def _parameter(self, function: FunctionInfo) -> str | None:
        t = self.target
        names = self._parameter_names(function)
        if t.parameter in names:
            return t.parameter
        if t.parameter_index is not None and t.parameter_index < len(function.positional_params):
            return function.positional_params[t.parameter_index]
        return None


def _with_inserted(
    body: Sequence[cst.BaseStatement], pending: list[tuple[int, cst.BaseStatement]]
) -> list[cst.BaseStatement]:
    out: list[cst.BaseStatement] = []
    for index, statement in enumerate(body):
        inserted = [new for at, new in pending if at == index]
        first = inserted[0] if inserted else None
        if isinstance(first, cst.SimpleStatementLine) and isinstance(
            statement, (cst.SimpleStatementLine, cst.If, cst.For, cst.While, cst.With, cst.Try)
        ):  # the blank lines and comments above the statement stay above it, the move first below them
            inserted[0] = first.with_changes(leading_lines=[*statement.leading_lines, *first.leading_lines])
            statement = statement.with_changes(leading_lines=())
        out.extend(inserted)
        out.append(_apart(statement) if inserted else statement)
    out.extend(new for at, new in pending if at >= len(body))
    return out


def _apart(statement: cst.BaseStatement) -> cst.BaseStatement:
    """A nested ``def``/``class`` that now follows an inserted statement, with the blank line
    before it that PEP 8 asks for (its own lines are unchanged)."""
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) and not (
        statement.leading_lines and statement.leading_lines[0].comment is None
    ):
        return statement.with_changes(leading_lines=[cst.EmptyLine(indent=False), *statement.leading_lines])
    return statement


def _to_name(local: str) -> Rewrite:
    """A rewrite that puts the name ``local`` in a node's place."""
    return lambda _updated: cst.Name(local)


def _assigns_exactly(statement: cst.BaseStatement, name: str, reads: Sequence[cst.BaseExpression]) -> bool:
    """``statement`` binds ``name`` to the one read: ``name = <read>``, or ``name`` and the
    read at the same place of an unpacking (``mu, nu = state["mu"], state["nu"]``). A move
    into ``name`` before it would leave ``name = name`` (``mu, nu = mu, nu``) behind."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1 or len(reads) != 1:
        return False
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign):
        return False
    return any(_pairs(target.target, assign.value, name, reads[0]) for target in assign.targets)


def _pairs(target: cst.BaseExpression, value: cst.BaseExpression, name: str, read: cst.BaseExpression) -> bool:
    """Whether unpacking ``value`` into ``target`` binds ``name`` to ``read`` (nested alike)."""
    if isinstance(target, cst.Name):
        return target.value == name and value is read
    if not (isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List))):
        return False
    targets, values = target.elements, value.elements
    if len(targets) != len(values) or any(isinstance(e, cst.StarredElement) for e in (*targets, *values)):
        return False
    return any(_pairs(t.value, v.value, name, read) for t, v in zip(targets, values))


def _assigned_name(statement: cst.CSTNode | None) -> str | None:
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


TRANSFORMS_KEEPING_ARGUMENTS = frozenset({"grad", "value_and_grad", "checkpoint", "remat"})
"""Transforms whose result takes the function's own positional arguments (``jax.grad(loss)(stack,
x)`` binds ``stack`` to ``loss``'s first parameter)."""


def _called_def(func: cst.BaseExpression) -> str | None:
    """The name of the function a call runs: ``f(...)``, or ``jax.grad(f)(...)`` and the other
    transforms of :data:`TRANSFORMS_KEEPING_ARGUMENTS`."""
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Call) and last_name(func.func) in TRANSFORMS_KEEPING_ARGUMENTS and func.args:
        first = func.args[0]
        if first.keyword is None and not first.star and isinstance(first.value, cst.Name):
            return first.value.value
    return None


def _scans_over(root: cst.CSTNode, name: str) -> list[tuple[cst.Call, cst.Name]]:
    """``(call, xs)`` for each ``scan(f, init, name)`` (or ``xs=name``) under ``root``."""
    found: list[tuple[cst.Call, cst.Name]] = []

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if last_name(node.func) != "scan":
                return
            positional = [a for a in node.args if a.keyword is None and not a.star]
            xs = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "xs"), None)
            if xs is None and len(positional) >= 3:
                xs = positional[2].value
            if isinstance(xs, cst.Name) and xs.value == name:
                found.append((node, xs))

    root.visit(Visitor())
    return found


ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)


def _arithmetic_operands(root: cst.CSTNode) -> set[int]:
    """The ids of the names under ``root`` that are an operand of ``+``, ``-``, ``*`` or ``/``."""
    found: set[int] = set()

    class Visitor(cst.CSTVisitor):
        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if isinstance(node.operator, ARITHMETIC):
                found.update(id(side) for side in (node.left, node.right) if isinstance(side, cst.Name))

    root.visit(Visitor())
    return found


def _calls_with_argument(root: cst.CSTNode, argument: cst.BaseExpression) -> list[cst.Call]:
    """The calls under ``root`` that take ``argument`` (that very node) as an argument."""
    found: list[cst.Call] = []

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if any(a.value is argument for a in node.args):
                found.append(node)

    root.visit(Visitor())
    return found


METADATA = frozenset({"shape", "dtype", "ndim", "size", "sharding"})
"""Attributes of an array that read no element: such a read moves nothing to device."""

SLICING_CALLS = frozenset({"dynamic_index_in_dim", "dynamic_slice", "dynamic_slice_in_dim", "index_in_dim"})
"""``jax.lax`` calls that read one contiguous slice of their first argument: a slice of a host
value read so is copied to device alone (never strided, unlike ``slice_in_dim``)."""


def _holders(root: cst.CSTNode, name: str) -> dict[int, cst.CSTNode]:
    """For each plain-name occurrence of ``name`` under ``root`` (by id), the node directly
    holding it (an ``Attribute``, a ``Subscript``, the ``Call`` whose argument it is)."""
    found: dict[int, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = []

    class Visitor(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, cst.Name) and node.value == name and stack:
                holder = stack[-1]
                if isinstance(holder, cst.Arg) and len(stack) > 1:
                    holder = stack[-2]
                found[id(node)] = holder
            stack.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            stack.pop()

    root.visit(Visitor())
    return found


def _metadata_read(holder: cst.CSTNode | None, use: cst.Name) -> bool:
    return isinstance(holder, cst.Attribute) and holder.value is use and holder.attr.value in METADATA


def _slice_of(holder: cst.CSTNode | None, use: cst.Name) -> cst.BaseExpression | None:
    """The expression reading one contiguous slice of ``use``: ``use[0]``, ``use[1, 2]``
    (integer indices: an array index would gather), or a :data:`SLICING_CALLS` call with
    ``use`` first; None otherwise."""
    if isinstance(holder, cst.Subscript) and holder.value is use:
        if all(
            isinstance(element.slice, cst.Index) and isinstance(element.slice.value, cst.Integer)
            for element in holder.slice
        ):
            return holder
        return None
    if isinstance(holder, cst.Call) and last_name(holder.func) in SLICING_CALLS:
        first = holder.args[0] if holder.args else None
        if first is not None and first.keyword is None and not first.star and first.value is use:
            return holder
    return None


def _defs(root: cst.CSTNode) -> list[cst.FunctionDef]:
    """The ``def`` statements directly in ``root``'s body (a function's block or a module)."""
    body = root.body if isinstance(root, (cst.Module, cst.IndentedBlock)) else []
    return [statement for statement in body if isinstance(statement, cst.FunctionDef)]


def _label(keys: tuple[PathKey, ...]) -> str:
    return f"output {format_output_path(keys)}" if keys else "the result"


def _name_uses(body: cst.CSTNode, name: str) -> list[tuple[cst.Name, bool]]:
    """Every plain-name occurrence of ``name`` under ``body``, and whether it is assigned there."""
    stores: set[int] = set()
    found: list[cst.Name] = []

    class Visitor(cst.CSTVisitor):
        def _targets(self, target: cst.BaseExpression) -> None:
            for node in target_name_nodes(target):
                stores.add(id(node))

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            self._targets(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            self._targets(node.target)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            self._targets(node.target)

        def visit_For(self, node: cst.For) -> None:
            self._targets(node.target)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)
            return False

        def visit_Arg(self, node: cst.Arg) -> bool:
            node.value.visit(self)
            return False

        def visit_Name(self, node: cst.Name) -> None:
            if node.value == name:
                found.append(node)

    body.visit(Visitor())
    return [(node, id(node) in stores) for node in found]
