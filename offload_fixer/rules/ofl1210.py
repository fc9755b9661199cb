"""OFL1210 host-copy-lane-slice: a copy between host and device memory of part of the lane
(last) dimension that libtpu cannot make."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.jax_compat import Spelling, xla_generation
from offload_fixer.rules import FixDoc, Rule, TargetBehaviour
from offload_fixer.rules.examples import example
from offload_fixer.rules.ofl1207 import backend_failure
from offload_fixer.rules.ofl1213 import strided

if TYPE_CHECKING:
    from offload_fixer.analysis.backend import Backend
    from offload_fixer.analysis.offloader import Failure

ASYNC_UPDATE_LANE_SLICE = msg.XlaMessage(
    "tpu-async-update-lane-slice",
    "Lane slice updating is not supported in async dynamic update slice yet.",
    codes.HOST_COPY_LANE_SLICE,
    status="UNIMPLEMENTED",
)
"""libtpu 0.0.17.1 and 0.0.42.1: an update into a host buffer that covers part of the lane dimension only."""
LANE_SLICE_SIZE = msg.XlaMessage(
    "tpu-lane-slice-size",
    "Slicing lane dimension is only supported when the lane slice size is a multiple of LaneCount.",
    codes.HOST_COPY_LANE_SLICE,
    status="UNIMPLEMENTED",
)
"""libtpu 0.0.50.1: a copy between host and device of a lane slice that is not whole vregs."""
LANE_COUNT = 128
"""Lanes of a TPU vector register: the last dimension's tile."""

_INVALID = """
def keep_left_half(x):
    history = jax.device_put(jnp.zeros((16, 128)), $HOST)
    # The left 64 of 128 lanes of every row, written into the host buffer.
    return lax.dynamic_update_slice(history, jax.device_put(x[:, :64], $HOST), (0, 0))


f = jax.jit(keep_left_half, out_shardings=$HOST_SHARDING)
args = (jax.ShapeDtypeStruct((16, 128), jnp.float32),)
"""

_VALID = """
def keep_left_half(x):
    history = jax.device_put(jnp.zeros((16, 128)), $HOST)
    # Whole rows of lanes: pad the half rows on device, then write them.
    rows = jnp.pad(x[:, :64], ((0, 0), (0, 64)))
    return lax.dynamic_update_slice(history, jax.device_put(rows, $HOST), (0, 0))


f = jax.jit(keep_left_half, out_shardings=$HOST_SHARDING)
args = (jax.ShapeDtypeStruct((16, 128), jnp.float32),)
"""

_WHY = (
    "libtpu copies between host and device memory in whole tiles of the lane (last) "
    "dimension. libtpu 0.0.17.1 and 0.0.42.1 cannot write part of the lanes into a host buffer (their async "
    "dynamic-update-slice); libtpu 0.0.50.1 copies part of the lanes only in multiples of 128, "
    "and for a slice copied to device only when no other dimension of the tile (the sublanes) "
    "is sliced too. Copy whole rows of lanes (pad on device, or slice the lanes on device "
    "after the copy), or lay the array out so that the sliced dimension is not the last."
)


def _libtpu_slices_lanes_in_tiles(sp: Spelling) -> bool:
    generation = xla_generation(sp.version)
    return generation.tpu_async_update_lane_slice_fails or generation.tpu_lane_slice_multiple_of_lane_count


def backend(b: Backend) -> Iterator[Failure]:
    """Copies between host and device of part of the lane (last) dimension that libtpu cannot
    make (the ``lane_*`` probes): on libtpu 0.0.17.1 and 0.0.42.1 an update into a host buffer that takes
    part of the lanes alone (two partial dimensions are OFL1208's already); on libtpu 0.0.50.1
    a lane part that is not a multiple of 128, in an update into a host buffer, or in a slice
    copied to device that also takes part of the sublane dimension. A strided slice fails
    otherwise (OFL1213)."""
    if b.target != "tpu":
        return
    xla = b.xla
    for seed, op in b.copies():
        partial = b.partial_dimensions(op)
        if not partial or strided(b, op):
            continue
        lane = b.rank(op) - 1
        update = b.is_update(op)
        if xla.tpu_async_update_lane_slice_fails and update and partial == [lane]:
            yield b.failure(seed, op, ASYNC_UPDATE_LANE_SLICE)
        elif (
            xla.tpu_lane_slice_multiple_of_lane_count
            and lane in partial
            and b.piece_shape(op)[lane] % LANE_COUNT
            and (update or lane - 1 in partial)
        ):
            yield b.failure(seed, op, LANE_SLICE_SIZE)


RULE = Rule(
    code=codes.HOST_COPY_LANE_SLICE,
    summary="A copy between host and device takes part of the lane dimension",
    what_it_does=(
        "Reports an update written from device into a host buffer, or a slice of a host value "
        "copied to device, that takes part of the last (lane) dimension in a way the libtpu "
        "of the installed JAX cannot copy."
    ),
    why_bad=(
        "XLA turns these into direct copies between host and device memory (an async "
        "dynamic-update-slice or slice on TPU), which libtpu builds from whole tiles of 128 "
        "lanes. The compile fails: libtpu 0.0.17.1 and 0.0.42.1 on any part of the lanes written into a "
        "host buffer; libtpu 0.0.50.1 on a part that is not a multiple of 128 lanes (a slice "
        "copied to device only when it also slices the sublanes). The CUDA plugins compile it."
    ),
    targets={
        "tpu": TargetBehaviour(
            "error",
            "compilation fails with libtpu 0.0.17.1 and 0.0.42.1 (an update of part of the lanes) and 0.0.50.1 "
            "(a part that is not a multiple of 128 lanes)",
            LANE_SLICE_SIZE.placeholder(),
        ),
        "gpu": TargetBehaviour("info", "compiles (the CUDA plugins 0.10.2 and 0.12.0.1)", None),
    },
    fixes=(
        FixDoc(
            "device",
            "Copy whole rows of lanes, and slice or pad the lanes on device",
            "display-only",
            "The copy grows to whole lane rows, and the layout of the host buffer may have to "
            "change; only the author knows which fits.",
        ),
    ),
    applies_to="TPU with the libtpu of JAX up to 0.12 (measured with JAX 0.6.2, 0.10.2 and 0.12.0.1), not GPU",
    invalid=(example(_INVALID),),
    valid=(example(_VALID),),
    applies=_libtpu_slices_lanes_in_tiles,
    failure_texts={
        ASYNC_UPDATE_LANE_SLICE: backend_failure(
            ASYNC_UPDATE_LANE_SLICE, "An update into a host buffer writes part of the lanes", _WHY
        ),
        LANE_SLICE_SIZE: backend_failure(
            LANE_SLICE_SIZE, "A copy between host and device takes part of a lane tile", _WHY
        ),
    },
    backend=backend,
    backend_stage="copies",
)
