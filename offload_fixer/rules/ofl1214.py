"""OFL1214 host-lanes-updated-by-layout: an update of a host buffer that the program writes
along whole lanes, but that libtpu makes a copy of part of the lanes: the buffer's layout puts
the updated dimension in lanes, or the shards of a 1-D host output are gathered into it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from offload_fixer import codes
from offload_fixer.rules import FixDoc, Rule, TargetBehaviour, ofl1210
from offload_fixer.rules.examples import example
from offload_fixer.rules.ofl1207 import backend_failure
from offload_fixer.rules.ofl1210 import LANE_COUNT

if TYPE_CHECKING:
    from offload_fixer.analysis.backend import Backend
    from offload_fixer.analysis.offloader import Failure

ASYNC_UPDATE_LANE_SLICE = replace(
    ofl1210.ASYNC_UPDATE_LANE_SLICE, kind="tpu-laid-out-lane-update", code=codes.HOST_LANES_UPDATED_BY_LAYOUT
)
"""libtpu 0.0.17.1 and 0.0.42.1: OFL1210's text, for a lane slice that libtpu's layout or its
gather of shards makes."""
LANE_SLICE_SIZE = replace(
    ofl1210.LANE_SLICE_SIZE, kind="tpu-laid-out-lane-slice-size", code=codes.HOST_LANES_UPDATED_BY_LAYOUT
)
"""libtpu 0.0.50.1: OFL1210's text, likewise."""
SUBLANES = {32: 8, 16: 16, 8: 32}
"""Rows of a TPU tile by element width: a tile holds 8 x 128 32-bit elements."""

_INVALID = """
def append_to_cache(cache, kv, position):
    # One position of a KV cache kept in host memory. Its head dimension (64) is not whole
    # 128-lane tiles, so libtpu lays the cache out with the positions in lanes: the update
    # writes one lane of each row.
    return lax.dynamic_update_slice(cache, kv, (0, position, 0))


f = jax.jit(
    append_to_cache,
    in_shardings=($HOST_SHARDING, None, None),
    out_shardings=$HOST_SHARDING,
    donate_argnums=(0,),
)
args = (
    jax.ShapeDtypeStruct((8, 128, 64), jnp.float32),
    jax.ShapeDtypeStruct((8, 1, 64), jnp.float32),
    jax.ShapeDtypeStruct((), jnp.int32),
)
"""

_INVALID_ROWS = """
def append_rows(history, rows, step):
    # Rows of 96 features written into a host buffer of 256 steps: 96 is not whole 128-lane
    # tiles, 256 is, so the steps lie in lanes and the update is a lane slice.
    return lax.dynamic_update_slice(history, rows, (step, 0))


f = jax.jit(append_rows, in_shardings=($HOST_SHARDING, None, None), out_shardings=$HOST_SHARDING)
args = (
    jax.ShapeDtypeStruct((256, 96), jnp.float32),
    jax.ShapeDtypeStruct((2, 96), jnp.float32),
    jax.ShapeDtypeStruct((), jnp.int32),
)
"""

_VALID = """
def append_to_cache(cache, keys, values, position):
    # Keys and values side by side: a last dimension of 2 x 64 = 128 lanes, one tile. The
    # cache keeps its natural layout and each update writes whole rows of lanes.
    kv = jnp.concatenate([keys, values], axis=-1)
    return lax.dynamic_update_slice(cache, kv, (0, position, 0))


f = jax.jit(
    append_to_cache,
    in_shardings=($HOST_SHARDING, None, None, None),
    out_shardings=$HOST_SHARDING,
    donate_argnums=(0,),
)
args = (
    jax.ShapeDtypeStruct((8, 128, 128), jnp.float32),
    jax.ShapeDtypeStruct((8, 1, 64), jnp.float32),
    jax.ShapeDtypeStruct((8, 1, 64), jnp.float32),
    jax.ShapeDtypeStruct((), jnp.int32),
)
"""

_VALID_ROWS = """
def append_rows(history, rows, step):
    # Rows of 128 features, whole lane tiles: the features stay in lanes and each update
    # writes whole rows.
    return lax.dynamic_update_slice(history, rows, (step, 0))


f = jax.jit(append_rows, in_shardings=($HOST_SHARDING, None, None), out_shardings=$HOST_SHARDING)
args = (
    jax.ShapeDtypeStruct((256, 128), jnp.float32),
    jax.ShapeDtypeStruct((2, 128), jnp.float32),
    jax.ShapeDtypeStruct((), jnp.int32),
)
"""

_WHY_LAYOUT = (
    "libtpu tiles the last two dimensions of an array in 8 x 128 tiles (16 or 32 rows for "
    "16- and 8-bit elements). Where the last dimension is not whole 128-lane tiles and the one "
    "before it wastes less padding in lanes, libtpu lays the array out with that dimension in "
    "lanes instead, host buffers included. An update along it (one position of a KV cache "
    "whose head dimension is 64) is then a copy of part of the lanes into host memory, which "
    "libtpu 0.0.17.1 and 0.0.42.1 cannot make and 0.0.50.1 makes only in multiples of 128. "
    "Make the last dimension whole lane tiles (keys and values side by side, or heads merged "
    "into it), or keep the updated buffer on device and move it to host whole."
)
_WHY_GATHER = (
    "The value is split over more devices than the host output it is returned in, so XLA "
    "gathers its shards into the host buffer, one update per shard; a 1-D array lies in lanes, "
    "and a shard that is not whole 128-lane tiles is a copy of part of the lanes, which libtpu "
    "0.0.42.1 and 0.0.50.1 cannot make. Declare the host output with the value's sharding (the "
    "host buffer then holds this device's shard as it is), or keep shards of whole lane tiles."
)


def lane_dimension(shape: list[int], bits: int | None) -> int:
    """The dimension libtpu lays out in lanes. The last, unless it is not whole 128-lane tiles
    and another dimension in lanes (the last then in sublanes) pads the array less; a tie keeps
    the last, else takes the more minor (a (16, 16, 8) int32 buffer keeps its updates along
    the first dimension whole: XLA's ``OutputStreamingInUnrolledScanLoop`` compiles). Measured on libtpu 0.0.17.1, 0.0.42.1 and 0.0.50.1: (8, 128, 64) and (128, 8, 64)
    float32 buffers have their 128 in lanes, (8, 64, 64), (8, 16, 64) and (136, 120) keep the last."""
    last = len(shape) - 1
    if last < 1 or shape[last] % LANE_COUNT == 0:
        return last
    rows = SUBLANES.get(bits or 32, 8)

    def padded_size(lanes: int) -> int:
        sublanes = last if lanes != last else last - 1
        size = 1
        for dim, extent in enumerate(shape):
            tile = LANE_COUNT if dim == lanes else rows if dim == sublanes else 1
            size *= _padded(extent, tile)
        return size

    return min(range(last + 1), key=lambda dim: (padded_size(dim), dim != last, -dim))


def _padded(size: int, tile: int) -> int:
    return -(-size // tile) * tile


def backend(b: Backend) -> Iterator[Failure]:
    """On TPU: each update into a host buffer along the dimension libtpu lays out in lanes in
    place of the last (the ``lane_layout_*`` probes; outside loops only: in a loop's body some
    such updates compile, a scan's rows of 16 stacked in 200 among them, and some fail), and each 1-D host output gathered from
    shards that are not whole lane tiles (the ``lane_gather_*`` probes). An update the program
    itself writes into part of the last dimension is OFL1210's."""
    if b.target != "tpu":
        return
    xla = b.xla
    message = ASYNC_UPDATE_LANE_SLICE if xla.tpu_async_update_lane_slice_fails else LANE_SLICE_SIZE
    if not (xla.tpu_async_update_lane_slice_fails or xla.tpu_lane_slice_multiple_of_lane_count):
        return
    for seed, op in b.copies():
        if not b.is_update(op):
            continue
        shape = b.buffer_shape(op)
        lane = lane_dimension(shape, b.element_bits(op))
        partial = b.partial_dimensions(op)
        if b.in_loop_body(op):
            continue  # in a loop, libtpu's choice is not modelled (a scan's stacked rows compile)
        laid_out = lane != len(shape) - 1 and lane in partial and b.piece_shape(op)[lane] % LANE_COUNT
        if laid_out and (xla.tpu_lane_slice_multiple_of_lane_count or partial == [lane]):
            yield b.failure(seed, op, message)
    if not xla.tpu_gathers_host_shards_by_updates:
        return
    for seed, move, value_splits, output_splits in b.gathered_host_outputs():
        shape = b.piece_shape(move)
        if len(shape) != 1 or value_splits[0] <= output_splits[0]:
            continue
        if (shape[0] // value_splits[0]) % LANE_COUNT:
            yield b.failure(seed, move, message)


_TITLE_LAYOUT = "An update of a host buffer writes part of the lanes libtpu laid it out in"

RULE = Rule(
    code=codes.HOST_LANES_UPDATED_BY_LAYOUT,
    summary="libtpu turns an update of a host buffer into a copy of part of its lanes",
    what_it_does=(
        "Reports an update written into a host buffer that the program writes along whole "
        "rows, but that libtpu makes a copy of part of the lane (minor) dimension: the buffer's "
        "last dimension is not whole 128-lane tiles, so libtpu lays it out with the updated "
        "dimension in lanes (a KV cache of head dimension 64, updated one position at a time); "
        "or a 1-D host output is gathered from shards that are not whole lane tiles (a value "
        "split over 4 devices, returned in a replicated `pinned_host` output)."
    ),
    why_bad=(
        "Nothing in the source writes part of the lanes, yet libtpu fails with the error of a "
        "lane slice: libtpu 0.0.17.1 and 0.0.42.1 cannot write part of the lanes into a host "
        "buffer, 0.0.50.1 only in multiples of 128. The CUDA plugins compile the same program."
    ),
    targets={
        "tpu": TargetBehaviour(
            "error",
            "compilation fails: an update along a laid-out lane dimension with libtpu 0.0.17.1, "
            "0.0.42.1 and 0.0.50.1, a gathered 1-D output with 0.0.42.1 and 0.0.50.1",
            ASYNC_UPDATE_LANE_SLICE.placeholder(),
        ),
        "gpu": TargetBehaviour("info", "compiles (the CUDA plugins 0.10.2 and 0.12.0.1)", None),
    },
    fixes=(
        FixDoc(
            "device",
            "Make the host buffer's last dimension whole 128-lane tiles, or give a gathered host "
            "output the value's sharding",
            "display-only",
            "Which dimension to widen (keys and values side by side, heads merged into the last "
            "dimension) or how the caller reads a sharded host output back only the author knows.",
        ),
    ),
    applies_to=(
        "TPU with the libtpu of JAX 0.6.2, 0.10.2 and 0.12.0.1 (measured; a gathered 1-D output "
        "from JAX 0.10.2), not GPU"
    ),
    invalid=(example(_INVALID), example(_INVALID_ROWS)),
    valid=(example(_VALID), example(_VALID_ROWS)),
    failure_texts={
        ASYNC_UPDATE_LANE_SLICE: backend_failure(ASYNC_UPDATE_LANE_SLICE, _TITLE_LAYOUT, _WHY_LAYOUT),
        LANE_SLICE_SIZE: backend_failure(LANE_SLICE_SIZE, _TITLE_LAYOUT, _WHY_LAYOUT),
    },
    backend=backend,
    backend_stage="copies",
)
