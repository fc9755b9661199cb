"""How the arguments and results of a partitioned module are laid out over its devices.

A module lowered for a mesh says so in its entry function's attributes, one of two ways:

* Shardy (JAX's partitioner from 0.7): ``sdy.mesh @mesh = <["fsdp"=64, "tensor"=4]>`` in the
  module, and ``sdy.sharding = #sdy.sharding<@mesh, [{}, {"fsdp"}, {"tensor"}]>`` on a value:
  the mesh's axes, by name, that each dimension is split over;
* GSPMD (JAX before 0.7): ``mhlo.sharding = "{devices=[1,64,4]<=[256]}"``: the pieces each
  dimension is split into, no names.

Both are read with jaxlib's bindings (Shardy's attributes, XLA's ``HloSharding``) into a
:class:`~offload_fixer.model.Sharding`; a value the module leaves to the partitioner has
none. The findings name a layout only where the module is partitioned over several devices;
the backend's rules read how many devices each dimension is split over
(:attr:`~offload_fixer.ir.module.EntryValue.splits`) from the same reading.
"""

from __future__ import annotations

from typing import Any

from jaxlib.mlir import ir

from offload_fixer.jax_compat import mlir as jax_mlir
from offload_fixer.model import Sharding

SDY_SHARDING = "sdy.sharding"
GSPMD_SHARDING = "mhlo.sharding"


def module_meshes(module: ir.Module) -> dict[str, tuple[tuple[str, int], ...]]:
    """Each ``sdy.mesh`` of the module by its symbol: its axes and their sizes."""
    sdy = jax_mlir.sdy_bindings()
    if sdy is None:
        return {}
    meshes = {}
    for view in module.body.operations:
        op = view.operation
        if op.name == "sdy.mesh":
            name = ir.StringAttr(op.attributes["sym_name"]).value
            meshes[name] = _mesh_axes(sdy, op.attributes["mesh"])
    return meshes


def entry_sharding(
    attrs: dict[str, ir.Attribute], type_: ir.Type, meshes: dict[str, tuple[tuple[str, int], ...]], partitions: int
) -> Sharding | None:
    """The layout one entry value's attributes declare, on a module of ``partitions`` devices;
    ``None`` where the value's layout is the partitioner's to choose (or a GSPMD module on one
    device)."""
    try:
        tensor = ir.RankedTensorType(type_)
    except (ValueError, TypeError):  # not a ranked tensor (a token)
        return None
    shape = tuple(int(n) for n in tensor.shape)
    dtype = element_name(tensor.element_type)
    sdy = jax_mlir.sdy_bindings()
    if SDY_SHARDING in attrs and sdy is not None:
        return _shardy(sdy, attrs[SDY_SHARDING], dtype, shape, meshes)
    if GSPMD_SHARDING in attrs and partitions > 1:
        tiles = jax_mlir.hlo_sharding_tiles(ir.StringAttr(attrs[GSPMD_SHARDING]).value, len(shape))
        return Sharding(dtype, shape, tiles) if tiles is not None else None
    return None


def _shardy(
    sdy: Any, attr: ir.Attribute, dtype: str, shape: tuple[int, ...], meshes: dict[str, Any]
) -> Sharding | None:
    sharding = sdy.TensorShardingAttr(attr)
    reference = sharding.mesh_or_ref
    try:
        mesh = meshes.get(ir.FlatSymbolRefAttr(reference).value)
    except (ValueError, TypeError):  # the mesh itself, inline
        mesh = _mesh_axes(sdy, reference)
    if mesh is None:
        return None
    sizes = dict(mesh)
    axes: list[tuple[str, ...]] = []
    tiles: list[int] = []
    sub_axes = False
    for dimension in sharding.dimension_shardings:
        names, pieces = [], 1
        for axis in sdy.DimensionShardingAttr(dimension).axes:
            ref = sdy.AxisRefAttr(axis)
            names.append(ref.name)
            part = ref.sub_axis_info
            sub_axes = sub_axes or part is not None
            pieces *= sdy.SubAxisInfoAttr(part).size if part is not None else sizes.get(ref.name, 1)
        axes.append(tuple(names))
        tiles.append(pieces)
    return Sharding(dtype, shape, tuple(tiles), tuple(axes), mesh, sub_axes)


def _mesh_axes(sdy: Any, mesh: Any) -> tuple[tuple[str, int], ...]:
    return tuple((sdy.MeshAxisAttr(axis).name, int(sdy.MeshAxisAttr(axis).size)) for axis in sdy.MeshAttr(mesh).axes)


def element_name(element: ir.Type) -> str:
    """An element type as XLA prints it: ``f32``, ``bf16``, ``s32``, ``u8``, ``pred``."""
    text = str(element)
    if text == "i1":
        return "pred"
    if text.startswith("ui"):
        return "u" + text[2:]
    if text.startswith("i") and text[1:].isdigit():
        return "s" + text[1:]
    return text
