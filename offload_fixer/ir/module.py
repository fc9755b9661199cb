"""Read a StableHLO module with jaxlib's MLIR bindings and index what the host-offloader walk needs.

One pass over the module finds the functions, the call sites of each private function, the
``annotate_device_placement`` custom calls (moves to host and to device) and the entry
function's argument and result attributes. The walk itself follows ``Value.uses`` lazily, so
the cost of an analysis is one scan plus the host paths, not a copy of the whole graph.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from offload_fixer.ir.locations import OpLocation, decode
from offload_fixer.ir.shardings import GSPMD_SHARDING, SDY_SHARDING, entry_sharding, module_meshes
from offload_fixer.jax_compat import mlir as jax_mlir
from offload_fixer.model import DEVICE as DEVICE_KIND
from offload_fixer.model import HOST_KINDS, HOST_MEMORY_SPACE_KINDS, PINNED_HOST, Sharding

PLACEMENT_ATTR = "_xla_buffer_placement"
ANNOTATION_TARGETS = frozenset({"annotate_device_placement"})
MOVE_TO_HOST_TARGET = "MoveToHost"
MOVE_TO_DEVICE_TARGET = "MoveToDevice"
SHARDING_TARGETS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"})
SHARDING_ATTRIBUTES = (SDY_SHARDING, GSPMD_SHARDING)
"""How an entry value's declared sharding is spelled (Shardy; GSPMD before it)."""


class ModuleReadError(ValueError):
    """The input is not a StableHLO module the bindings can read."""


@dataclass(frozen=True)
class EntryValue:
    """An argument or result of ``@main`` and the attributes XLA's entry layout comes from."""

    index: int
    memory_kind: str
    info: str
    """``jax.result_info`` / ``jax.arg_info``, or the argument's location name."""
    element_bits: int | None
    value_type: str = ""
    """The tensor type, ``tensor<4x8xf32>``."""
    sharding: Sharding | None = None
    """Its layout over the devices the module is partitioned over, where the module declares
    one (:mod:`offload_fixer.ir.shardings`)."""
    declared: bool = False
    """Whether the module gives it a sharding (Shardy's or GSPMD's): the jit declared it
    (``in_shardings``/``out_shardings``), rather than JAX inferring its memory kind from types."""

    @property
    def splits(self) -> tuple[int, ...] | None:
        """How many devices each dimension is split over, where its Shardy sharding names the
        module's mesh by whole axes; ``None`` otherwise (GSPMD, a sub-axis, no sharding)."""
        found = self.sharding
        return found.tiles if found is not None and found.mesh and not found.sub_axes else None

    @property
    def in_host_memory_space(self) -> bool:
        """Whether XLA's entry layout puts this value in host memory (``pinned_host`` only)."""
        return self.memory_kind in HOST_MEMORY_SPACE_KINDS


class ModuleView:
    """The module plus the indexes the walk uses. Operations and blocks hash by identity."""

    def __init__(self, module: ir.Module) -> None:
        self.module = module
        self.name = _module_name(module)
        self.functions: dict[str, ir.Operation] = {}
        self.call_sites: dict[str, list[ir.Operation]] = {}
        self.placements: list[ir.Operation] = []
        self.op_count = 0
        for view in module.body.operations:
            op = view.operation
            if op.name == "func.func":
                self.functions[symbol_name(op)] = op
        if "main" not in self.functions:
            raise ModuleReadError("the module has no @main function")
        self.main = self.functions["main"]
        attributes = module.operation.attributes
        self.partitions = (
            ir.IntegerAttr(attributes["mhlo.num_partitions"]).value if "mhlo.num_partitions" in attributes else 1
        )
        """Devices the module is partitioned over (its mesh's size)."""
        self._meshes = module_meshes(module)
        self._location_cache: dict[ir.Operation, OpLocation] = {}
        self._index(self.main, set())
        self.args = tuple(self._entry_values("arg_attrs", self.entry_block.arguments, "jax.arg_info"))
        self.results = tuple(self._entry_values("res_attrs", _result_types(self.main), "jax.result_info"))
        self.aliased_outputs: dict[int, int] = {}
        """Output index -> the donated argument whose buffer it reuses (``tf.aliasing_output``)."""
        attrs = ir.ArrayAttr(self.main.attributes["arg_attrs"]) if "arg_attrs" in self.main.attributes else None
        for index in range(len(self.args)):
            entry = attrs[index] if attrs is not None and index < len(attrs) else None
            if entry is not None and "tf.aliasing_output" in ir.DictAttr(entry):
                self.aliased_outputs[ir.IntegerAttr(ir.DictAttr(entry)["tf.aliasing_output"]).value] = index

    def host_buffers_donated_to_device_outputs(self) -> list[tuple[EntryValue, EntryValue]]:
        """(donated host argument, device output reusing its buffer) of each such alias. JAX
        matches a donated buffer to an output by shape and dtype alone where an output's memory
        kind is left to it (an ``out_shardings`` leaf of ``None``), so a ``pinned_host`` argument
        can be given a device output's place; unless the compiler rejects it (OFL1209), the
        executable compiles, and PjRt aborts the process when it returns that output."""
        return [
            (self.args[donor], self.results[output])
            for output, donor in sorted(self.aliased_outputs.items())
            if output < len(self.results)
            and self.args[donor].memory_kind in HOST_KINDS
            and self.results[output].memory_kind not in HOST_KINDS
        ]

    def donation_abort(self) -> str | None:
        """Why the compiled program would abort when it returns its outputs (``None`` where it
        would not): the first donated host buffer given to a device output, in words."""
        aliases = self.host_buffers_donated_to_device_outputs()
        if not aliases:
            return None
        argument, output = aliases[0]
        return (
            f"JAX reuses the donated {argument.memory_kind} buffer of {argument.info or f'argument {argument.index}'} "
            f"for output {output.info or output.index}, in {output.memory_kind} memory (an `out_shardings` leaf of "
            "None lets JAX match donated buffers by shape alone), and PjRt aborts on returning it "
            "(\"PjRtBuffer's memory kind does not match sharding's memory kind\"; measured on the CPU and on a "
            "TPU v5e): declare that output's sharding, or do not donate the argument"
        )

    def lay_out_in_host_memory(self, kind: str) -> None:
        """Entry parameters and outputs of memory ``kind`` laid out in host memory (S(5)), as
        ``pinned_host`` ones are: what libtpu 0.0.17.1 does with ``unpinned_host``
        (``XlaGeneration.tpu_unpinned_host_is_host_memory``)."""
        self.args = tuple(replace(v, memory_kind=PINNED_HOST) if v.memory_kind == kind else v for v in self.args)
        self.results = tuple(replace(v, memory_kind=PINNED_HOST) if v.memory_kind == kind else v for v in self.results)

    @property
    def entry_block(self) -> ir.Block:
        block: ir.Block = self.main.regions[0].blocks[0]
        return block

    def _index(self, func: ir.Operation, seen: set[str]) -> None:
        """Program order, callees where they are called: the order XLA processes moves in."""
        seen.add(symbol_name(func))
        for op in walk_operations(func):
            self.op_count += 1
            name = op.name
            if name == "stablehlo.custom_call":
                if placement(op) is not None or custom_call_target(op) in (MOVE_TO_HOST_TARGET, MOVE_TO_DEVICE_TARGET):
                    self.placements.append(op)
            elif name == "func.call":
                callee = callee_name(op)
                self.call_sites.setdefault(callee, []).append(op)
                if callee in self.functions and callee not in seen:
                    self._index(self.functions[callee], seen)

    def _entry_values(self, attr: str, values: Any, info_key: str) -> Iterator[EntryValue]:
        attrs = ir.ArrayAttr(self.main.attributes[attr]) if attr in self.main.attributes else None
        for index, value in enumerate(values):
            entry = attrs[index] if attrs is not None and index < len(attrs) else None
            kind = _dict_string(entry, "mhlo.memory_kind") or DEVICE_KIND
            info = _dict_string(entry, info_key)
            if info is None and isinstance(value, ir.Value):
                location = jax_mlir.value_location(value)
                info = None if location is None else decode(location).name
            type_ = value.type if isinstance(value, ir.Value) else value
            named = named_attributes(entry) if entry is not None else {}
            sharding = entry_sharding(named, type_, self._meshes, self.partitions) if named else None
            declared = any(key in named for key in SHARDING_ATTRIBUTES)
            yield EntryValue(index, kind, info or "", element_bits(type_), str(type_), sharding, declared)

    def location(self, op: ir.Operation) -> OpLocation:
        cached = self._location_cache.get(op)
        if cached is None:
            cached = self._location_cache[op] = decode(op.location)
        return cached


def load(source: Any, context: ir.Context | None = None) -> ModuleView:
    """Accept a ``jax.stages.Lowered``, an ``ir.Module``, StableHLO text or bytecode."""
    if hasattr(source, "compiler_ir"):
        return ModuleView(source.compiler_ir("stablehlo"))
    if isinstance(source, ir.Module):
        return ModuleView(source)
    if isinstance(source, ir.Operation) and source.name == "builtin.module":
        return ModuleView(ir.Module.parse(str(source.get_asm(enable_debug_info=True)), context=source.context))
    if isinstance(source, (str, bytes, bytearray)):
        ctx = context or make_context()
        try:
            module = ir.Module.parse(bytes(source) if not isinstance(source, str) else source, context=ctx)
        except Exception as exc:  # MLIRError's text carries the diagnostics
            raise ModuleReadError(f"cannot parse the StableHLO module: {exc}") from exc
        return ModuleView(module)
    raise ModuleReadError(
        f"expected a jax Lowered, an MLIR module, StableHLO text or bytecode, got {type(source).__name__}"
    )


def make_context() -> ir.Context:
    """An MLIR context with every dialect JAX emits (StableHLO, CHLO, SDY, func...) registered."""
    return jax_mlir.make_ir_context()


# ---------------------------------------------------------------------------------------
# Small readers over operations
def walk_operations(root: ir.Operation) -> Iterator[ir.Operation]:
    """Every operation nested in ``root``'s regions, in program order (pre-order)."""
    for region in root.regions:
        for block in region.blocks:
            for view in block.operations:
                op = view.operation
                yield op
                if len(op.regions):
                    yield from walk_operations(op)


def placement(op: ir.Operation) -> str | None:
    """The memory a JAX ``annotate_device_placement`` moves its operand to, else ``None``."""
    if custom_call_target(op) not in ANNOTATION_TARGETS:
        return None
    attrs = op.attributes
    if "mhlo.frontend_attributes" not in attrs:
        return None
    return _dict_string(attrs["mhlo.frontend_attributes"], PLACEMENT_ATTR)


def is_move_to_host(op: ir.Operation) -> bool:
    return placement(op) in HOST_KINDS or custom_call_target(op) == MOVE_TO_HOST_TARGET


def is_move_to_device(op: ir.Operation) -> bool:
    return placement(op) == DEVICE_KIND or custom_call_target(op) == MOVE_TO_DEVICE_TARGET


def custom_call_target(op: ir.Operation) -> str | None:
    if op.name != "stablehlo.custom_call" or "call_target_name" not in op.attributes:
        return None
    return ir.StringAttr(op.attributes["call_target_name"]).value


def aliased_results(op: ir.Operation, operand_index: int) -> list[int]:
    """Result indices a custom call's ``output_operand_aliases`` ties to this operand."""
    if "output_operand_aliases" not in op.attributes:
        return []
    out = []
    for attr in ir.ArrayAttr(op.attributes["output_operand_aliases"]):
        alias = stablehlo.OutputOperandAlias(attr)
        if alias.operand_index == operand_index:
            indices = list(alias.output_tuple_indices)
            out.append(indices[0] if indices else 0)
    return out


def callee_name(op: ir.Operation) -> str:
    return ir.FlatSymbolRefAttr(op.attributes["callee"]).value


def tuple_index(op: ir.Operation) -> int:
    return ir.IntegerAttr(op.attributes["index"]).value


def frontend_attribute(op: ir.Operation, key: str) -> str | None:
    if "mhlo.frontend_attributes" not in op.attributes:
        return None
    return _dict_string(op.attributes["mhlo.frontend_attributes"], key)


CONSTANT_PRESERVING = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.convert"})


def is_constant(value: ir.Value[Any]) -> bool:
    """A value XLA folds to a constant: a constant, or a broadcast/reshape/convert of one."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return False
    op = owner.operation
    if op.name == "stablehlo.constant":
        return True
    return op.name in CONSTANT_PRESERVING and is_constant(op.operands[0])


def is_splat_one(value: ir.Value[Any]) -> bool:
    """A constant whose every element is one (``1.0`` broadcast to a shape, converted or
    reshaped): what XLA's simplifier drops from a multiply (``x * 1.0`` is ``x``)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return False
    op = owner.operation
    if op.name in CONSTANT_PRESERVING:
        return is_splat_one(op.operands[0])
    if op.name != "stablehlo.constant":
        return False
    elements = _cast(ir.DenseElementsAttr, op.attributes["value"])
    if elements is None or not elements.is_splat:
        return False
    splat = elements.get_splat_value()
    number = _cast(ir.FloatAttr, splat) or _cast(ir.IntegerAttr, splat)
    return number is not None and number.value == 1


def _cast(kind: Any, attr: Any) -> Any:
    """``attr`` as the attribute class ``kind``, or None (the bindings raise on a mismatch;
    ``isinstance`` against the class is not reliable across jaxlib releases)."""
    try:
        return kind(attr)
    except (ValueError, TypeError):
        return None


def is_constant_index_set_scatter(op: ir.Operation) -> bool:
    """A scatter that writes one update at constant indices and keeps the update's value
    (``x.at[0].set(v)``): XLA's simplifier turns it into a dynamic-update-slice."""
    if op.name != "stablehlo.scatter" or len(op.operands) != 3:
        return False
    indices = op.operands[1]
    if not is_constant(indices):
        return False
    shape = _shape(indices.type)
    numbers = stablehlo.ScatterDimensionNumbers(op.attributes["scatter_dimension_numbers"])
    count = 1
    for dim in shape or [0]:
        count *= dim
    if shape is None or count != len(numbers.scattered_dims_to_operand_dims):
        return False  # several updates: a real scatter
    body = op.regions[0].blocks[0]
    terminator = body.operations[len(body.operations) - 1].operation
    return (
        len(body.operations) == 1
        and len(terminator.operands) == 1
        and terminator.operands[0] == body.arguments[len(body.arguments) - 1]
    )


def is_bitcast_reshape(op: ir.Operation) -> bool:
    """A reshape (or a broadcast that only adds unit dimensions) keeps the bytes in place;
    XLA's simplifier turns both into bitcasts before the host offloader runs."""
    if op.name not in ("stablehlo.reshape", "stablehlo.broadcast_in_dim"):
        return False
    before = _shape(op.operands[0].type)
    after = _shape(op.results[0].type)
    if before is None or after is None:
        return False
    return [d for d in before if d != 1] == [d for d in after if d != 1]


def _shape(type_: ir.Type) -> list[int] | None:
    try:
        return list(ir.RankedTensorType(type_).shape)
    except (ValueError, TypeError):
        return None


def element_bits(type_: ir.Type) -> int | None:
    """Bit width of a tensor's elements; sub-byte types get explicitly customised layouts."""
    try:
        element = ir.RankedTensorType(type_).element_type
    except (ValueError, TypeError):
        return None
    for kind in (ir.IntegerType, getattr(ir, "FloatType", None)):
        if kind is None:
            continue
        try:
            width = getattr(kind(element), "width", None)
        except (ValueError, TypeError):
            continue
        return int(width) if width is not None else None
    return None


def _result_types(func: ir.Operation) -> list[ir.Type]:
    return list(ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value).results)


def symbol_name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _module_name(module: ir.Module) -> str | None:
    attrs = module.operation.attributes
    return ir.StringAttr(attrs["sym_name"]).value if "sym_name" in attrs else None


def named_attributes(attr: ir.Attribute) -> dict[str, ir.Attribute]:
    """The entries of a dictionary attribute, by name (the bindings index a ``DictAttr``
    by position but give it no iterator)."""
    entries = ir.DictAttr(attr)
    return {entries[position].name: entries[position].attr for position in range(len(entries))}


def _dict_string(attr: Any, key: str) -> str | None:
    if attr is None:
        return None
    d = ir.DictAttr(attr)
    if key not in d:
        return None
    value = d[key]
    return ir.StringAttr(value).value if isinstance(value, ir.StringAttr) or _is_string(value) else str(value)


def _is_string(attr: Any) -> bool:
    try:
        ir.StringAttr(attr)
    except (ValueError, TypeError):
        return False
    return True
