"""Read an ``--xla_dump_to`` directory (and JAX's ``JAX_DUMP_IR_TO`` files) back into modules.

An XLA error names an HLO instruction (``multiply.11``, ``tuple.64``). Those names are given
when JAX's StableHLO becomes HLO and passes rename and add instructions, so the name is
only a pointer: it is looked up in the ``before_optimizations`` HLO, followed forward to
the entry root, and turned into the *flat output index* it reaches. Everything the user
sees (pytree path, source lines, the diagnosis) then comes from that index in the
StableHLO module the analysis reads: JAX's own dump when present (it carries
``jax.result_info`` and memory kinds), XLA's ``module.mlir`` copy of it, or the HLO itself
converted back to StableHLO with jaxlib's bindings.

jaxlib differences are detected by feature, not by version: 0.4.x binds
``xla_computation_to_mlir_module`` and keeps the root tuple; newer jaxlib binds
``hlo_to_stablehlo`` (which flattens the root tuple into the return) and exposes HLO
instructions.

Over 500 lines on purpose: one reading of a dump directory, from its files to the flat
output index an instruction reaches, whose steps share the parsed modules.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from jaxlib.mlir import ir

from offload_fixer.ir.locations import decode
from offload_fixer.ir.module import (
    SHARDING_TARGETS,
    custom_call_target,
    is_move_to_device,
    is_move_to_host,
    make_context,
    tuple_index,
    walk_operations,
)
from offload_fixer.jax_compat import mlir as jax_mlir
from offload_fixer.model import (
    DEVICE,
    HOST_KINDS,
    PINNED_HOST,
    Span,
    format_output_path,
    parse_output_path,
)
from offload_fixer.source.decoding import read_regular_file
from offload_fixer.source.locations import user_span

HOST_MEMORY_SPACE = 5
"""``Layout::kHostMemorySpace``: ``S(5)`` in an HLO layout."""

SourceKind = Literal["jax-ir", "xla-mlir", "hlo-text", "hlo-proto"]

_BEFORE = re.compile(r"(?:^|\.)module_(?P<number>\d+)\.(?P<name>.+?)\.before_optimizations\.(?P<ext>txt|hlo\.pb)$")
_AFTER = re.compile(r"(?:^|\.)module_(?P<number>\d+)\.(?P<name>.+?)\.(?:\w+_)?after_optimizations")
_MODULE_DIR = re.compile(r"(?:^|\.)module_(?P<number>\d+)\.(?P<name>.+)$")
_JAX_IR = re.compile(r"^jax_ir(?P<number>\d+)_(?P<name>.+)_compile\.mlir$")
_MEMORY_SPACE = re.compile(r"S\((?P<space>\d+)\)")


class DumpReadError(ValueError):
    """A dump file that cannot be read: not readable, not UTF-8, or not what jaxlib reads."""


def _read_text(path: str) -> str:
    """A dump file's text; a file that cannot be read or is not UTF-8 is a :class:`DumpReadError`."""
    data = _read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DumpReadError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


def _read_bytes(path: str) -> bytes:
    try:
        return read_regular_file(path)
    except OSError as exc:
        raise DumpReadError(f"{path}: cannot read: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class DumpedModule:
    """The files one compiled module left in a dump directory."""

    name: str
    number: int | None
    """XLA's ``module_NNNN`` number: later compilations have larger numbers."""
    hlo_text: str | None = None
    hlo_proto: str | None = None
    xla_mlir: str | None = None
    jax_mlir: str | None = None
    compiled: bool = False
    """XLA finished optimising it (``*after_optimizations*`` files exist); a module that
    failed to compile has only its ``before_optimizations`` files."""

    @property
    def label(self) -> str:
        return f"module_{self.number:04d}.{self.name}" if self.number is not None else self.name

    @property
    def jax_number(self) -> int | None:
        """JAX's dump counter (``jax_ir0007_...``): later lowerings have larger numbers."""
        match = _JAX_IR.match(os.path.basename(self.jax_mlir)) if self.jax_mlir else None
        return int(match.group("number")) if match else None

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(p for p in (self.hlo_text, self.hlo_proto, self.xla_mlir, self.jax_mlir) if p)


def find_dumped_modules(dump_dir: str | os.PathLike[str]) -> list[DumpedModule]:
    """Every module in an XLA dump directory, oldest first.

    JAX's ``jax_irNNNN_<module>_compile.mlir`` files are looked for in the directory and one
    level below (``JAX_DUMP_IR_TO`` is often a sub-directory of the XLA dump) and paired
    with the latest XLA module of the same name; unpaired ones stand alone.
    """
    root = os.fspath(dump_dir)
    if not os.path.isdir(root):
        raise FileNotFoundError(f"not a directory: {root}")
    try:
        os.scandir(root).close()
    except OSError as exc:
        raise DumpReadError(f"{root}: cannot list the dump directory: {exc.strerror or exc}") from None
    found: dict[tuple[int, str], dict[str, Any]] = {}
    compiled: set[tuple[int, str]] = set()
    jax_files: dict[str, list[tuple[int, str]]] = {}
    for directory in _dump_directories(root):
        for entry in _entries(directory):
            name = entry.name
            jax_match = _JAX_IR.match(name)
            if jax_match and entry.is_file():
                jax_files.setdefault(jax_match.group("name"), []).append((int(jax_match.group("number")), entry.path))
                continue
            if directory != root:
                continue
            before = _BEFORE.search(name)
            if before and entry.is_file():
                key = (int(before.group("number")), before.group("name"))
                slot = "hlo_text" if before.group("ext") == "txt" else "hlo_proto"
                found.setdefault(key, {})[slot] = entry.path
                continue
            after = _AFTER.search(name)
            if after and entry.is_file():
                compiled.add((int(after.group("number")), after.group("name")))
                continue
            module_dir = _MODULE_DIR.search(name)
            if module_dir and entry.is_dir() and os.path.isfile(os.path.join(entry.path, "module.mlir")):
                key = (int(module_dir.group("number")), module_dir.group("name"))
                found.setdefault(key, {})["xla_mlir"] = os.path.join(entry.path, "module.mlir")

    modules = []
    latest_number: dict[str, int] = {}
    for number, name in found:
        latest_number[name] = max(number, latest_number.get(name, -1))
    for (number, name), files in sorted(found.items()):
        jax_mlir = None
        candidates = jax_files.get(_jax_safe_name(name))
        if candidates and number == latest_number[name]:
            jax_mlir = max(candidates)[1]
            del jax_files[_jax_safe_name(name)]
        modules.append(
            DumpedModule(
                name,
                number,
                compiled=(number, name) in compiled,
                jax_mlir=jax_mlir,
                **files,
            )
        )
    for safe_name, candidates in sorted(jax_files.items()):
        modules.append(DumpedModule(safe_name, None, jax_mlir=max(candidates)[1]))
    return modules


def _dump_directories(root: str) -> Iterator[str]:
    yield root
    for entry in _entries(root):
        if entry.is_dir() and not _MODULE_DIR.search(entry.name):
            yield entry.path


def _entries(directory: str) -> list[os.DirEntry]:
    """A directory's entries; one that cannot be listed holds none (the root is checked first)."""
    try:
        return list(os.scandir(directory))
    except OSError:
        return []


def _jax_safe_name(module_name: str) -> str:
    """How ``jax._src.interpreters.mlir.dump_module_to_file`` spells a module in a file name."""
    return re.sub(r"[^\w.)( -]", "", module_name)


# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OutputSlot:
    """One flat output of the entry function, as the user would name it."""

    index: int
    path: str | None
    """JAX keystr relative to the returned value (``[1]['mu']``); ``None`` without ``jax.result_info``."""
    memory_kind: str
    span: Span | None
    """Where the returned value was computed: the user's line."""


class LoadedModule:
    """A dumped module read with jaxlib: its HLO (for names) and its StableHLO (for analysis)."""

    def __init__(self, dumped: DumpedModule) -> None:
        self.dumped = dumped

    @cached_property
    def _context(self) -> ir.Context:
        return make_context()

    # -- what the analysis reads -------------------------------------------------------
    @cached_property
    def source_kind(self) -> SourceKind:
        if self.dumped.jax_mlir:
            return "jax-ir"
        if self.dumped.xla_mlir:
            return "xla-mlir"
        return "hlo-text" if self.dumped.hlo_text else "hlo-proto"

    @cached_property
    def stablehlo(self) -> str:
        """StableHLO text with locations: JAX's own module when dumped, else the HLO converted
        back, with each entry value's memory kind read from the entry computation layout."""
        path = self.dumped.jax_mlir or self.dumped.xla_mlir
        if path:
            return _read_text(path)
        module = self._hlo_as_stablehlo(self.hlo_module)
        _flatten_root_tuple(module)
        _annotate_memory_kinds(module, *self._entry_memory_spaces)
        return str(module.operation.get_asm(enable_debug_info=True))

    @cached_property
    def outputs(self) -> tuple[OutputSlot, ...]:
        module = ir.Module.parse(self.stablehlo, context=self._context)
        main = _function(module, "main")
        attrs = list(ir.ArrayAttr(main.attributes["res_attrs"])) if "res_attrs" in main.attributes else []
        returned = _returned_values(main)
        slots = []
        for index, value in enumerate(returned):
            entry = ir.DictAttr(attrs[index]) if index < len(attrs) else None
            info = _string_entry(entry, "jax.result_info")
            kind = _string_entry(entry, "mhlo.memory_kind") or DEVICE
            span = None
            owner = value.owner
            if not isinstance(owner, ir.Block):
                span = user_span(decode(owner.operation.location))
            path = format_output_path(parse_output_path(info)) if info is not None else None
            slots.append(OutputSlot(index, path, kind, span))
        return tuple(slots)

    # -- HLO names ----------------------------------------------------------------------
    @cached_property
    def hlo_module(self) -> Any:
        """An ``HloModule``: the dumped text or proto, else XLA's conversion of the StableHLO
        (the converter XLA itself runs, so the names match a run with the same jaxlib)."""
        api = jax_mlir.hlo_bindings()
        if self.dumped.hlo_text:
            text = _read_text(self.dumped.hlo_text)
            return _checked(lambda: api.hlo_module_from_text(text), self.dumped.hlo_text)
        if self.dumped.hlo_proto:
            return _module_from_proto(_read_bytes(self.dumped.hlo_proto), self.dumped.hlo_proto)
        path = self.dumped.jax_mlir or self.dumped.xla_mlir
        assert path is not None
        text = _read_text(path)
        return _checked(lambda: jax_mlir.stablehlo_to_hlo(text), path)

    @cached_property
    def hlo_text(self) -> str:
        if self.dumped.hlo_text:
            return _read_text(self.dumped.hlo_text)
        return self.hlo_module.to_string()

    def mentions(self, instruction: str) -> bool:
        """Whether the HLO defines an instruction of that name (a text search, no parsing)."""
        pattern = r"(?<![\w.\-%])%?" + re.escape(instruction) + r"(?![\w.\-])\s*="
        return re.search(pattern, self.hlo_text) is not None

    @cached_property
    def _names_module(self) -> ir.Module:
        """The HLO converted to StableHLO without metadata: every op's location is then its
        HLO instruction name, which is how a name is found without reading any text."""
        api = jax_mlir.hlo_bindings()
        options = api.HloPrintOptions()
        options.print_metadata = False
        bare = api.hlo_module_from_text(self.hlo_module.to_string(options))
        return self._hlo_as_stablehlo(bare)

    def _hlo_as_stablehlo(self, hlo_module: Any) -> ir.Module:
        return ir.Module.parse(jax_mlir.hlo_to_stablehlo(hlo_module), context=self._context)

    @cached_property
    def _entry_memory_spaces(self) -> tuple[list[int | None], list[int | None]]:
        """Memory space of each entry parameter and result (``S(5)`` is host)."""
        shape = jax_mlir.hlo_bindings().XlaComputation(self.hlo_module.as_serialized_hlo_module_proto()).program_shape()
        params = [_memory_space(s) for s in shape.parameter_shapes()]
        result = shape.result_shape()
        results = [_memory_space(s) for s in (result.tuple_shapes() if result.is_tuple() else [result])]
        return params, results

    def outputs_fed_by(self, instruction: str, custom_call: bool = False) -> tuple[int, ...] | None:
        """Flat outputs the named instruction's host value reaches without a move back to device.

        ``()`` when the name cannot be where XLA's walk starts here (no operand of it is in
        host memory: some other module's instruction of the same name was meant). ``None``
        when the name cannot be placed (absent, or inside a computation the entry calls);
        the caller then relies on the analysis alone.
        """
        module = self._names_module
        main = _function(module, "main")
        starts = _starting_values(module, main, instruction, self.host_arguments, custom_call)
        if starts is None:
            if self._is_flattened_root_tuple(instruction):
                returned = _returned_values(main)
                return tuple(i for i, v in enumerate(returned) if _is_host_value(v, self.host_arguments))
            return None
        tuple_return = _returns_one_tuple(main)
        outputs: set[int] = set()
        seen: set[tuple[ir.Value, tuple[int, ...]]] = set()
        queue = list(starts)
        while queue:
            value, path = queue.pop()
            if (value, path) in seen:
                continue
            seen.add((value, path))
            for use in value.uses:
                user = use.owner.operation
                queue.extend(_successors(user, use.operand_number, path, main, tuple_return, outputs))
        return tuple(sorted(outputs))

    @cached_property
    def host_arguments(self) -> frozenset[int]:
        """Entry parameters in host memory: streamed in, so they start a walk of their own."""
        module = ir.Module.parse(self.stablehlo, context=self._context)
        main = _function(module, "main")
        if "arg_attrs" not in main.attributes:
            return frozenset()
        kinds = [_string_entry(ir.DictAttr(a), "mhlo.memory_kind") for a in ir.ArrayAttr(main.attributes["arg_attrs"])]
        return frozenset(i for i, kind in enumerate(kinds) if kind in HOST_KINDS)

    def _is_flattened_root_tuple(self, instruction: str) -> bool:
        """jaxlib >= 0.5 turns the root tuple into the return's operands; its name is then
        only in the HLO, whose instructions those bindings expose."""
        for computation in self.hlo_module.computations():
            instructions = jax_mlir.hlo_instructions_of(computation)
            if instructions is None:
                return False
            for hlo in instructions:
                if hlo.name == instruction:
                    return str(hlo.opcode).endswith("kTuple") and not hlo.users()
        return False


# ---------------------------------------------------------------------------------------
# The forward walk over the names-only module
def _starting_values(
    module: ir.Module,
    main: ir.Operation,
    instruction: str,
    host_arguments: frozenset[int],
    custom_call: bool,
) -> list[tuple[ir.Value, tuple[int, ...]]] | None:
    """Where XLA's walk starts for this name: a user of a host value (for a tuple, the
    positions host values fill), the move itself for the custom-call form, or a host
    parameter. ``[]`` if the named op or parameter cannot start a walk; ``None`` if no op or
    parameter has the name."""
    for func in _functions(module):
        for op in walk_operations(func):
            if decode(op.location).name != instruction:
                continue
            if func != main:
                return None
            top = _top_level(op, main)
            if top != op:
                return [(result, ()) for result in top.results]
            if custom_call:
                return [(result, ()) for result in op.results] if is_move_to_host(op) else []
            host = [i for i, v in enumerate(op.operands) if _is_host_value(v, host_arguments)]
            if op.name == "stablehlo.tuple":
                return [(op.result, (position,)) for position in host]
            return [(result, ()) for result in op.results] if host else []
    for argument in main.regions[0].blocks[0].arguments:
        location = jax_mlir.value_location(argument)
        if location is not None and decode(location).name == instruction:
            return [(argument, ())] if _argument_number(argument) in host_arguments else []
    return None


def _successors(
    user: ir.Operation,
    operand: int,
    path: tuple[int, ...],
    main: ir.Operation,
    tuple_return: bool,
    outputs: set[int],
) -> list[tuple[ir.Value, tuple[int, ...]]]:
    """Where a host value goes next, close to XLA's walk: a move to device or a custom call
    that is not a move ends the path; tuples and get-tuple-element track the index. Regions
    are summarised: a value entering a while leaves as the same result; one reaching a
    region's return leaves as the parent's result at that position."""
    name = user.name
    if name == "func.return":
        if _parent_function(user) == main:
            if tuple_return and path:
                outputs.add(path[0])
            elif not tuple_return:
                outputs.add(operand)
        return []
    if name == "stablehlo.return":
        parent = user.parent
        if parent is None:
            return []
        return [(parent.results[operand], path)] if operand < len(parent.results) else []
    if name == "stablehlo.custom_call":
        if is_move_to_device(user):
            return []
        if not (is_move_to_host(user) or custom_call_target(user) in SHARDING_TARGETS):
            return []
    if name == "stablehlo.tuple":
        return [(user.result, (operand, *path))]
    if name == "stablehlo.get_tuple_element":
        if not path:
            return [(user.result, ())]
        return [(user.result, path[1:])] if path[0] == tuple_index(user) else []
    if name == "stablehlo.while":
        return [(user.results[operand], path)]
    return [(result, path) for result in user.results]


def _is_host_value(value: ir.Value, host_arguments: frozenset[int]) -> bool:
    """A move to host's result or a host parameter, seen through bitcast-like ops and
    sharding annotations (the ops XLA skips before the starting instruction)."""
    while True:
        owner = value.owner
        if isinstance(owner, ir.Block):
            return _argument_number(value) in host_arguments
        op = owner.operation
        if is_move_to_host(op):
            return True
        passthrough = op.name in (
            "stablehlo.bitcast_convert",
            "stablehlo.reshape",
            "mhlo.copy",
            "stablehlo.copy",
        )
        if not len(op.operands) or not (passthrough or custom_call_target(op) in SHARDING_TARGETS):
            return False
        value = op.operands[0]


def _argument_number(value: ir.Value) -> int:
    return ir.BlockArgument(value).arg_number


def _top_level(op: ir.Operation, main: ir.Operation) -> ir.Operation:
    """The op of ``main``'s body that contains ``op`` (itself when it is in the body)."""
    current = op
    while True:
        parent = current.parent
        if parent is None or parent.operation == main:
            return current
        current = parent.operation


def _parent_function(op: ir.Operation) -> ir.Operation | None:
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        parent = parent.parent
    return parent.operation if parent is not None else None


# ---------------------------------------------------------------------------------------
# Module helpers
def _functions(module: ir.Module) -> list[ir.Operation]:
    return [op.operation for op in module.body.operations if op.operation.name == "func.func"]


def _function(module: ir.Module, name: str) -> ir.Operation:
    for func in _functions(module):
        if ir.StringAttr(func.attributes["sym_name"]).value == name:
            return func
    raise DumpReadError(f"the module has no @{name} function")


def _returned_values(main: ir.Operation) -> list[ir.Value]:
    """The flat outputs: the return's operands, or the elements of the one tuple returned
    (jaxlib 0.4's HLO import keeps the root tuple)."""
    block = main.regions[0].blocks[0]
    terminator = list(block.operations)[-1].operation
    operands = list(terminator.operands)
    if _returns_one_tuple(main):
        owner = operands[0].owner
        if not isinstance(owner, ir.Block) and owner.operation.name == "stablehlo.tuple":
            return list(owner.operation.operands)
    return operands


def _returns_one_tuple(main: ir.Operation) -> bool:
    results = list(ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).results)
    return len(results) == 1 and _is_tuple_type(results[0])


def _is_tuple_type(type_: ir.Type) -> bool:
    try:
        ir.TupleType(type_)
    except (ValueError, TypeError):
        return False
    return True


def _string_entry(entry: ir.DictAttr | None, key: str) -> str | None:
    if entry is None or key not in entry:
        return None
    return ir.StringAttr(entry[key]).value


def _flatten_root_tuple(module: ir.Module) -> None:
    """Return the root tuple's elements instead of the tuple, as JAX's own modules do."""
    from jaxlib.mlir.dialects import func as func_dialect

    main = _function(module, "main")
    if not _returns_one_tuple(main):
        return
    terminator = list(main.regions[0].blocks[0].operations)[-1].operation
    owner = terminator.operands[0].owner
    if isinstance(owner, ir.Block) or owner.operation.name != "stablehlo.tuple":
        return
    root_tuple = owner.operation
    values = list(root_tuple.operands)
    with module.context, terminator.location:
        func_dialect.ReturnOp(values, ip=ir.InsertionPoint(terminator))
        terminator.erase()
        if not list(root_tuple.result.uses):
            root_tuple.erase()
        function_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        flat = ir.FunctionType.get(list(function_type.inputs), [value.type for value in values])
        main.attributes["function_type"] = ir.TypeAttr.get(flat)


def _annotate_memory_kinds(module: ir.Module, params: list[int | None], results: list[int | None]) -> None:
    """Write each host entry value's memory kind as JAX would (``mhlo.memory_kind``)."""
    main = _function(module, "main")
    context = module.context
    with context:
        for attr_name, spaces in (("arg_attrs", params), ("res_attrs", results)):
            existing = list(ir.ArrayAttr(main.attributes[attr_name])) if attr_name in main.attributes else []
            entries = []
            for index, space in enumerate(spaces):
                fields = {}
                if index < len(existing):
                    old = ir.DictAttr(existing[index])
                    fields = {old[i].name: old[i].attr for i in range(len(old))}
                if space == HOST_MEMORY_SPACE:
                    fields["mhlo.memory_kind"] = ir.StringAttr.get(PINNED_HOST)
                entries.append(ir.DictAttr.get(fields))
            if entries:
                main.attributes[attr_name] = ir.ArrayAttr.get(entries)


def _memory_space(shape: Any) -> int | None:
    """``S(5)`` in the printed shape (``f32[8]{0:S(5)}``). ``Shape.layout()`` is not used: it
    aborts the process on a shape without a layout."""
    if not shape.is_array():
        return None
    match = _MEMORY_SPACE.search(str(shape))
    return int(match.group("space")) if match else None


def _module_from_proto(data: bytes, path: str) -> Any:
    """XLA dumps an ``HloProto`` (the module is its field 1); accept a bare module too."""
    api = jax_mlir.hlo_bindings()
    wrapped = _length_delimited_field(data, 1)
    for candidate in (wrapped, data):
        if candidate is None:
            continue
        try:
            return api.HloModule.from_serialized_hlo_module_proto(candidate)
        except RuntimeError:  # jaxlib's XlaRuntimeError / JaxRuntimeError
            continue
    raise DumpReadError(f"{path}: not an HloProto or HloModuleProto this jaxlib can read")


def _length_delimited_field(data: bytes, number: int) -> bytes | None:
    """The bytes of a top-level length-delimited protobuf field (wire format, no schema)."""
    position = 0
    try:
        while position < len(data):
            key, position = _varint(data, position)
            field, wire_type = key >> 3, key & 7
            if wire_type == 2:
                length, position = _varint(data, position)
                if field == number:
                    return data[position : position + length]
                position += length
            elif wire_type == 0:
                _, position = _varint(data, position)
            elif wire_type == 1:
                position += 8
            elif wire_type == 5:
                position += 4
            else:
                return None
    except IndexError:
        return None
    return None


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, position


def _checked(read: Any, path: str) -> Any:
    try:
        return read()
    except (
        RuntimeError,
        ValueError,
    ) as exc:  # jaxlib's status errors are RuntimeErrors
        raise DumpReadError(f"{path}: {exc}") from exc
