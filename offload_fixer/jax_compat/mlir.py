"""jaxlib's MLIR and HLO bindings, as each jaxlib exposes them: the MLIR context, locations,
the StableHLO <-> HLO translations and the instructions of an HLO module.

Part of :mod:`offload_fixer.jax_compat`: what differs between jaxlib releases is measured here
by feature, in the CI's environments (jaxlib 0.4.35, 0.6.2, 0.10.2, 0.12.0.1).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jaxlib.mlir import ir


@dataclass(frozen=True)
class HloInstruction:
    computation: str
    name: str
    opcode: str
    text: str
    """The instruction as HLO text prints it (attributes included)."""
    entry: bool
    root: bool


def hlo_instructions(text: str) -> list[HloInstruction]:
    """Every instruction of the HLO translation of StableHLO ``text``, computation by
    computation in print order. Read from the printed HLO, which every jaxlib has (the
    ``HloModule.computations()`` API appeared only in jaxlib 0.7)."""
    import re

    module = stablehlo_to_hlo(text)
    header = re.compile(r"^(ENTRY )?%?([\w.\-]+) \(")
    # A tuple shape of more than five elements carries ``/*index=5*/`` comments.
    line_re = re.compile(r"^\s+(ROOT )?%?([\w.\-]+) = (?:\((?:[^=]|/\*index=\d+\*/)*?\)|\S+) ([\w\-]+)\(")
    out: list[HloInstruction] = []
    computation, entry = "", False
    for line in module.to_string().splitlines():
        found = header.match(line)
        if found:
            computation, entry = found.group(2), bool(found.group(1))
            continue
        found = line_re.match(line)
        if found:
            out.append(
                HloInstruction(computation, found.group(2), found.group(3), line.strip(), entry, bool(found.group(1)))
            )
    return out


def stablehlo_to_hlo(text: str) -> Any:
    """jaxlib's own MLIR -> HLO translation of a module (the first step of every XLA
    compile), as an ``HloModule`` whose instructions carry the names XLA's messages print.
    ``xla_client._xla.mlir.mlir_module_to_xla_computation``, private in 0.4.35 - 0.12.0.1."""
    computation = _mlir_bindings().mlir_module_to_xla_computation(text, use_tuple_args=False, return_tuple=False)
    return computation.get_hlo_module()


# ---------------------------------------------------------------------------------------
# jaxlib's MLIR and HLO bindings: what each jaxlib exposes, measured in the CI's environments
# (jaxlib 0.4.35, 0.6.2, 0.10.2, 0.12.0.1).
def make_ir_context() -> ir.Context:
    """An MLIR context with every dialect JAX emits (StableHLO, CHLO, SDY, func...) registered:
    ``jax._src.interpreters.mlir.make_ir_context``, private in 0.4.35 - 0.12.0.1."""
    from jax._src.interpreters import mlir as jax_mlir

    return jax_mlir.make_ir_context()


@functools.cache
def typed_locations() -> bool:
    """Whether jaxlib's MLIR bindings have typed location classes (``NameLoc``, ``CallSiteLoc``,
    ``FileLineColLoc``, ``FusedLoc``): jaxlib 0.10.2 and 0.12.0.1 do; 0.4.35 and 0.6.2 only
    print a location."""
    from jaxlib.mlir import ir

    return all(hasattr(ir, name) for name in ("NameLoc", "CallSiteLoc", "FileLineColLoc", "FusedLoc"))


def value_location(value: Any) -> Any:
    """The location of an MLIR value (an operation's result or a block argument), or None
    where the bindings do not give one: ``Value.location`` exists from jaxlib 0.6.2 (not 0.4.35)."""
    return value.location if hasattr(value, "location") else None


def sdy_bindings() -> Any:
    """jaxlib's Shardy attribute classes (``MeshAttr``, ``TensorShardingAttr``...), or None where
    this jaxlib has none: ``jaxlib.mlir.dialects.sdy`` in jaxlib 0.10.2 and 0.12.0.1."""
    try:
        from jaxlib.mlir.dialects import sdy
    except ImportError:
        return None
    return sdy


def hlo_bindings() -> Any:
    """jaxlib's HLO classes (``HloModule``, ``HloPrintOptions``, ``XlaComputation``,
    ``hlo_module_from_text``): ``jax._src.lib.hlo`` (``jaxlib._hlo``) in jaxlib 0.10.2 and
    0.12.0.1, ``xla_client._xla`` (``xla_extension``) in 0.4.35 and 0.6.2."""
    try:
        from jax._src.lib import hlo

        return hlo
    except ImportError:
        from jax._src.lib import xla_client

        return xla_client._xla


def _mlir_bindings() -> Any:
    """jaxlib's MLIR <-> XLA conversions: ``xla_client._xla.mlir`` in 0.4.35 - 0.12.0.1."""
    from jax._src.lib import xla_client

    return xla_client._xla.mlir


def hlo_to_stablehlo(hlo_module: Any) -> str | bytes:
    """XLA's own conversion of an ``HloModule`` to StableHLO (text or bytecode, for
    ``ir.Module.parse``): ``mlir.hlo_to_stablehlo`` from jaxlib 0.6.2, through an
    ``XlaComputation`` in 0.4.35."""
    proto = hlo_module.as_serialized_hlo_module_proto()
    bindings = _mlir_bindings()
    if hasattr(bindings, "hlo_to_stablehlo"):
        return bindings.hlo_to_stablehlo(proto)
    return bindings.xla_computation_to_mlir_module(hlo_bindings().XlaComputation(proto))


def hlo_instructions_of(computation: Any) -> list[Any] | None:
    """The instructions of an ``HloComputation``, or None where the bindings do not list
    them: ``HloComputation.instructions`` exists in jaxlib 0.10.2 and 0.12.0.1, not in 0.4.35
    or 0.6.2."""
    return list(computation.instructions()) if hasattr(computation, "instructions") else None


def hlo_sharding_tiles(text: str, rank: int) -> tuple[int, ...] | None:
    """The pieces each of ``rank`` dimensions is split into by an HLO sharding written as
    text (``mhlo.sharding = "{devices=[1,64,4]<=[256]}"``: GSPMD's, which names no mesh), read
    by jaxlib's ``HloSharding`` (0.4.35 - 0.12.0.1); ``None`` for one that places the value on
    one device, or that jaxlib cannot read."""
    from jax._src.lib import xla_client

    try:
        sharding = xla_client.HloSharding.from_string(text)
        if sharding.is_replicated():
            return (1,) * rank
        if not sharding.is_tiled():
            return None
        tiles = tuple(sharding.tile_assignment_dimensions())
    except Exception:  # noqa: BLE001 - a tuple sharding or a text this jaxlib does not read
        return None
    return tiles[:rank] if len(tiles) >= rank else None
