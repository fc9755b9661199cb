"""The names XLA gives a module's instructions, so a finding reads like the user's TPU log.

XLA names each instruction when it translates the StableHLO module to HLO: after the op's
location (``mul.3`` for JAX's ``jit(f)/mul``, ``params__b__.1`` for the argument
``params['b']``) and a counter per name. The translation is jaxlib's own code, the first step
of every compile, so running it here gives exactly those names. To know which instruction an
operation became, a copy of the module is translated with each operation tagged by a frontend
attribute (``ofl.op``), which XLA carries onto the instruction and which changes no name.

On a mesh (``mhlo.num_partitions`` > 1) XLA's SPMD partitioner rebuilds every parameter it
partitions under the name ``param``, uniquified module-wide (``param``, ``param.1``, ...):
first the parameters of the computations a loop, a kept call or (on TPU) a conditional runs,
then the entry's, in XLA's post order from the root (the first output's operands depth
first: where each is first reached, neither by number nor where the module prints it). A name
the module already holds is skipped, and so is the id Shardy's round trip renumbers it to
(``param.1`` becomes ``param.0``, both stay taken). Measured on libtpu 0.0.42.1 and 0.0.50.1
and the CUDA plugins 0.10.2 and 0.12.0.1 (``tests/xla/probes.py``' mesh probes).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from jaxlib.mlir import ir

from offload_fixer.ir import kernel_names
from offload_fixer.ir import module as irm

if TYPE_CHECKING:
    from offload_fixer.jax_compat import XlaGeneration
    from offload_fixer.jax_compat.mlir import HloInstruction

TAG = "ofl.op"
_TAG_TEXT = re.compile(r'ofl\.op="(\d+)"')
_PARAMETER = re.compile(r"\bparameter\((\d+)\)")
PARTITIONED_PARAMETER = "param"
"""The name XLA's SPMD partitioner gives each parameter it rebuilds (``HandleParameter``)."""
_LOOP = re.compile(r"\bcondition=%?([\w.\-]+), body=%?([\w.\-]+)")
_BRANCHES = re.compile(r"\bbranch_computations=\{([^}]*)\}|\b(?:true|false)_computation=%?([\w.\-]+)")
_CALLEE = re.compile(r"\bto_apply=%?([\w.\-]+)")
KEPT_CALLS = ("xla.sdy.manual_computation_body", "shmap_body")
"""Calls XLA keeps until the partitioner runs: a shard_map body (Shardy's name, then JAX's
before Shardy); every other call is inlined first, and its parameters are gone."""


class HloNames:
    """Names of ``view``'s operations, entry parameters and entry root, computed on first use."""

    def __init__(self, view: irm.ModuleView, target: str = "tpu", xla: XlaGeneration | None = None) -> None:
        self.view = view
        self.target = target
        self.xla = xla
        self._ops: dict[ir.Operation, str] | None = None
        self._parameters: dict[int, str] = {}
        self._root: str | None = None

    def op(self, op: ir.Operation) -> str | None:
        self._translate()
        return self._ops.get(op) if self._ops is not None else None

    def parameter(self, index: int) -> str | None:
        self._translate()
        return self._parameters.get(index)

    def root(self) -> str | None:
        self._translate()
        return self._root

    def _translate(self) -> None:
        if self._ops is not None:
            return
        self._ops = {}
        tagged = _tagged_copy(self.view.module)
        ops = [op for top in tagged.body.operations for op in irm.walk_operations(top.operation)]
        originals = [op for top in self.view.module.body.operations for op in irm.walk_operations(top.operation)]
        from offload_fixer.jax_compat import mlir as jax_mlir

        try:
            instructions = jax_mlir.hlo_instructions(str(tagged.operation.get_asm(enable_debug_info=True)))
        except Exception:  # noqa: BLE001 - a module XLA's translation rejects: names stay unknown
            return
        partitioned = _partitions(self.view.module) > 1
        for instruction in instructions:
            tag = _TAG_TEXT.search(instruction.text)
            if tag is not None:
                index = int(tag.group(1))
                if index < len(originals) and ops[index].name == originals[index].name:
                    self._ops.setdefault(originals[index], instruction.name)
            if instruction.entry:
                if instruction.opcode == "parameter":
                    parameter = _PARAMETER.search(instruction.text)
                    if parameter is not None:
                        self._parameters[int(parameter.group(1))] = instruction.name
                if instruction.root:
                    self._root = instruction.name
        if partitioned:
            self._parameters = self._partitioned_parameters(instructions)
            renamed = _partitioned_names(instructions, _shardy(self.view.module), self.target)
            self._ops = {op: renamed.get(name, name) for op, name in self._ops.items()}
            self._root = renamed.get(self._root, self._root) if self._root is not None else None
        elif self.target == "tpu" and self.xla is not None and self.xla.tpu_names_kernel_calls:
            self._name_kernels(originals, [i.name for i in instructions], self.xla.tpu_names_kernel_operands)

    def _name_kernels(self, originals: list[ir.Operation], names: list[str], operands: bool) -> None:
        """libtpu's names for each Pallas kernel's call and, ``operands``, for the operands of
        one that carries its debug locations (:mod:`.kernel_names`), kernel by kernel in
        program order."""
        assert self._ops is not None
        uniquer = kernel_names.Uniquer(names)
        entry = self.view.entry_block
        for op in originals:
            if irm.custom_call_target(op) != kernel_names.KERNEL_TARGET:
                continue
            arguments = kernel_names.argument_names(op) if operands else None
            for value, argument in zip(op.operands, arguments or ()):
                if isinstance(value.owner, ir.Block):
                    if value.owner == entry:
                        number = ir.BlockArgument(value).arg_number
                        self._rename_parameter(number, uniquer.unique(argument))
                    continue
                producer = value.owner.operation
                current = self._ops.get(producer)
                if current is not None and len(producer.results) == 1:
                    self._rename_op(producer, uniquer.unique(f"{current}.{argument}"))
            call = kernel_names.call_name(self.view.location(op).name)
            if call is not None and op in self._ops:
                self._rename_op(op, uniquer.unique(call))

    def _rename_parameter(self, number: int, name: str) -> None:
        old = self._parameters.get(number)
        self._parameters[number] = name
        if old is not None and self._root == old:
            self._root = name

    def _rename_op(self, op: ir.Operation, name: str) -> None:
        assert self._ops is not None
        if self._root == self._ops[op]:
            self._root = name
        self._ops[op] = name

    def _partitioned_parameters(self, instructions: list[HloInstruction]) -> dict[int, str]:
        """Entry parameter number -> the name XLA's SPMD partitioner gives it."""
        inlines_shard_map = self.xla.inlines_shard_map_body if self.xla is not None else False
        counts: dict[str, int] = {}
        by_computation: dict[str, list[HloInstruction]] = {}
        for instruction in instructions:
            by_computation.setdefault(instruction.computation, []).append(instruction)
            if instruction.opcode == "parameter":
                counts[instruction.computation] = counts.get(instruction.computation, 0) + 1
        entry = next((i.computation for i in instructions if i.entry), None)
        before = 0
        pending = [entry] if entry is not None else []
        while pending:  # every call site of a computation is a copy of it by then (flattened call graph)
            for instruction in by_computation.get(pending.pop(), []):
                for callee, partitioned in self._callees(instruction, inlines_shard_map):
                    before += counts.get(callee, 0) if partitioned else 0
                    pending.append(callee)
        ids = _free_ids(PARTITIONED_PARAMETER, [i.name for i in instructions], _shardy(self.view.module))
        names: dict[int, str] = {}
        visited = [i for i in _post_order(by_computation.get(entry, []) if entry else []) if i.opcode == "parameter"]
        for order, instruction in enumerate(visited):
            number = _PARAMETER.search(instruction.text)
            if number is not None:
                free = ids[before + order]
                names[int(number.group(1))] = PARTITIONED_PARAMETER if free == 0 else f"{PARTITIONED_PARAMETER}.{free}"
        return names

    def _callees(self, instruction: HloInstruction, inlines_shard_map: bool) -> list[tuple[str, bool]]:
        """The computations ``instruction`` runs, each with whether the partitioner rebuilds its
        parameters. A reduction's or a scatter's ``to_apply`` is no such computation; XLA:GPU
        turns a conditional with small branches into selects before partitioning (measured with
        elementwise branches), libtpu keeps it."""
        text = instruction.text
        if instruction.opcode == "while":
            found = _LOOP.search(text)
            return [(found.group(2), True), (found.group(1), True)] if found else []
        if instruction.opcode == "conditional":
            branches: list[str] = []
            for match in _BRANCHES.finditer(text):
                if match.group(1) is not None:
                    branches.extend(name.strip().lstrip("%") for name in match.group(1).split(","))
                else:
                    branches.append(match.group(2))
            return [(branch, self.target == "tpu") for branch in branches]
        if instruction.opcode == "call":
            found = _CALLEE.search(text)
            if found is None:
                return []
            kept = found.group(1).startswith(KEPT_CALLS) and not inlines_shard_map
            return [(found.group(1), kept)]
        return []


UNCLONED = ("parameter", "constant", "get-tuple-element", "custom-call")
"""Instructions the partitioner does not rebuild under their own name: parameters become
``param``, constants ``<name>.clone``, and element reads and custom calls get new names that no
module name foretells."""


def _partitioned_names(instructions: list[HloInstruction], renumbered: bool, target: str) -> dict[str, str]:
    """Instruction name -> the name of its copy in the partitioned module. XLA first inlines
    every call but a shard_map body (each inlined instruction takes an id of its root), then
    the partitioner rebuilds each instruction under its name's root (a tuple as ``tuple``), in
    program order, taking the next id no earlier name holds. libtpu builds one tuple of its own
    before partitioning (measured: every tuple named one later than on XLA:GPU)."""
    roots = {i.name: "tuple" if i.opcode == "tuple" else _split(i.name)[0] for i in instructions}
    names = [i.name for i in instructions]
    tuples = sum(1 for i in instructions if i.opcode == "tuple")
    inlined = {
        found.group(1)
        for i in instructions
        if i.opcode == "call" and (found := _CALLEE.search(i.text)) and not found.group(1).startswith(KEPT_CALLS)
    }
    free: dict[str, list[int]] = {}

    def take(root: str) -> int:
        if root not in free:
            free[root] = _free_ids(root, names, renumbered, tuples if root == "tuple" else None)
        return free[root].pop(0)

    if target == "tpu":
        take("tuple")
    for instruction in instructions:
        if instruction.computation in inlined and instruction.opcode not in UNCLONED:
            take(roots[instruction.name])
    out: dict[str, str] = {}
    for instruction in instructions:
        if instruction.opcode in UNCLONED:
            continue
        root = roots[instruction.name]
        number = take(root)
        out[instruction.name] = root if number == 0 else f"{root}.{number}"
    return out


def _partitions(module: ir.Module) -> int:
    attrs = module.operation.attributes
    return ir.IntegerAttr(attrs["mhlo.num_partitions"]).value if "mhlo.num_partitions" in attrs else 1


def _shardy(module: ir.Module) -> bool:
    """Whether the module is partitioned by Shardy (it declares an ``sdy.mesh``): XLA then
    translates it to HLO a second time, renumbering each name from 0."""
    return any(top.operation.name == "sdy.mesh" for top in module.body.operations)


_OPERAND = re.compile(r"%([\w.\-]+)")
_SIDE_EFFECT = "has_side_effect=true"


def _post_order(computation: list[HloInstruction]) -> list[HloInstruction]:
    """``MakeInstructionPostOrder`` once dead code is gone: from each instruction no other uses
    (the root, a parameter, an instruction with a side effect), in print order, its operands
    depth first, first operand first, each once. The translation's unused element reads and
    reshapes are removed before the partitioner runs, so they start nothing."""
    by_name = {i.name: i for i in computation}
    operands: dict[str, list[str]] = {}
    used: set[str] = set()
    for instruction in computation:
        call = instruction.text.split(" = ", 1)[-1]
        names = [name for name in _OPERAND.findall(call) if name in by_name and name != instruction.name]
        operands[instruction.name] = names
        used.update(names)
    order: list[HloInstruction] = []
    seen: set[str] = set()
    starts = [
        i for i in computation if i.name not in used and (i.root or i.opcode == "parameter" or _SIDE_EFFECT in i.text)
    ]
    for start in starts:
        stack: list[tuple[str, bool]] = [(start.name, False)]
        while stack:
            name, expanded = stack.pop()
            if expanded:
                order.append(by_name[name])
                continue
            if name in seen:
                continue
            seen.add(name)
            stack.append((name, True))
            stack.extend((operand, False) for operand in reversed(operands[name]) if operand not in seen)
    return order


def _split(name: str) -> tuple[str, int | None]:
    """XLA's ``NameUniquer``: a name's root and its numeric suffix (``param.2`` -> param, 2)."""
    root, dot, suffix = name.rpartition(".")
    if dot and root and suffix.isdigit():
        return root, int(suffix)
    return name, None


def _free_ids(root: str, names: list[str], renumbered: bool, count: int | None = None) -> list[int]:
    """The ids ``NameUniquer`` hands out for ``root``, in order, skipping those the module's
    names hold and, after Shardy's renumbering, 0 .. n-1 for its n such instructions (``count``:
    Shardy names every tuple ``tuple``, whatever the first translation called it)."""
    taken = set()
    for name in names:
        found_root, number = _split(name)
        if found_root == root:
            taken.add(number or 0)
    if renumbered:
        taken.update(range(len(taken) if count is None else count))
    ids: list[int] = []
    candidate = 0
    while len(ids) < len(names) + 1:
        if candidate not in taken:
            ids.append(candidate)
        candidate += 1
    return ids


def _tagged_copy(module: ir.Module) -> ir.Module:
    context = module.context
    copy = ir.Module.parse(str(module.operation.get_asm(enable_debug_info=True)), context=context)
    index = 0
    for top in copy.body.operations:
        for op in irm.walk_operations(top.operation):
            entries: dict[str, ir.Attribute] = {}
            if "mhlo.frontend_attributes" in op.attributes:
                entries.update(irm.named_attributes(op.attributes["mhlo.frontend_attributes"]))
            entries[TAG] = ir.StringAttr.get(str(index), context=context)
            op.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(entries, context=context)
            index += 1
    return copy
