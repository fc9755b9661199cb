"""OFL1208 host-slice-in-several-dimensions: a slice of a host value, copied to device, that
slices more than one dimension (libtpu 0.0.17.1 and 0.0.42.1 cannot make it an async slice)."""

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

ASYNC_SLICE_DIMENSIONS = msg.XlaMessage(
    "tpu-async-slice-dimensions",
    "Async slice only supports slicing in 1 dimension",
    codes.HOST_SLICE_IN_SEVERAL_DIMENSIONS,
    status="UNIMPLEMENTED",
)
"""libtpu 0.0.17.1 and 0.0.42.1 copy a slice of a host value to device as an async slice, which takes
one sliced dimension only (``XlaGeneration.tpu_async_slice_one_dimension_only``)."""

_INVALID = """
def tile(stack, i, j):
    # One (64, 128) tile of the host-resident stack: dimensions 0 and 1 are both sliced.
    return jax.device_put(lax.dynamic_slice(stack, (i, j, 0, 0), (1, 1, 64, 128)), $DEVICE)


f = jax.jit(tile, in_shardings=($HOST_SHARDING, None, None))
args = (jax.ShapeDtypeStruct((4, 4, 64, 128), jnp.float32), jnp.int32(1), jnp.int32(2))
"""

_VALID = """
def tile(stack, i, j):
    # Copy one row of tiles (only dimension 0 sliced), then pick the tile on device.
    row = jax.device_put(lax.dynamic_slice_in_dim(stack, i, 1, axis=0), $DEVICE)
    return lax.dynamic_slice_in_dim(row, j, 1, axis=1)


f = jax.jit(tile, in_shardings=($HOST_SHARDING, None, None))
args = (jax.ShapeDtypeStruct((4, 4, 64, 128), jnp.float32), jnp.int32(1), jnp.int32(2))
"""


_SEVERAL_DIMENSIONS = backend_failure(
    ASYNC_SLICE_DIMENSIONS,
    "A slice of a host value copied to device slices more than one dimension",
    (
        "A slice of a value in host memory that is moved to device becomes a copy of just that "
        "slice, which libtpu 0.0.17.1 and 0.0.42.1 run as an async slice, and their async slice takes one "
        "sliced dimension only. Slice the leading dimension in host memory, move that to "
        "device, and slice the other dimensions there."
    ),
)


def _libtpu_slices_one_dimension(sp: Spelling) -> bool:
    return xla_generation(sp.version).tpu_async_slice_one_dimension_only


def backend(b: Backend) -> Iterator[Failure]:
    """Slices copied from host to device, and updates written from device into host buffers,
    that take part of more than one dimension, on the libtpu generations whose async slice
    takes one (the ``slice_two_dimensions`` and ``update_two_dimensions`` probes). A strided
    slice fails otherwise (OFL1213)."""
    if b.target != "tpu" or not b.xla.tpu_async_slice_one_dimension_only:
        return
    for seed, op in b.copies():
        if len(b.partial_dimensions(op)) > 1 and not strided(b, op):
            yield b.failure(seed, op, ASYNC_SLICE_DIMENSIONS)


RULE = Rule(
    code=codes.HOST_SLICE_IN_SEVERAL_DIMENSIONS,
    summary="A slice of a host value copied to device slices more than one dimension",
    what_it_does=(
        "Reports a slice or dynamic slice of a value in host memory that is moved to device "
        "(XLA copies just the slice), or an update written from device into a host buffer, "
        "that takes less than the whole of two or more dimensions, for the libtpu generations "
        "that cannot copy such a slice."
    ),
    why_bad=(
        "XLA turns a slice that feeds a move to device into a host-to-device copy of the "
        "slice. libtpu 0.0.17.1 (JAX 0.6) and 0.0.42.1 (JAX 0.10) emit that copy as an async slice, which supports "
        "slicing in one dimension only, and the compile fails; the same holds for the async "
        "dynamic-update-slice that writes a device update into a host buffer. libtpu 0.0.50.1 "
        "and the CUDA plugins compile both (libtpu 0.0.50.1 with the lane limits of OFL1210)."
    ),
    targets={
        "tpu": TargetBehaviour(
            "error",
            "compilation fails with libtpu 0.0.17.1 (JAX 0.6) and 0.0.42.1 (JAX 0.10); libtpu 0.0.50.1 compiles it",
            ASYNC_SLICE_DIMENSIONS.placeholder(),
        ),
        "gpu": TargetBehaviour("info", "compiles (the CUDA plugins 0.10.2 and 0.12.0.1 copy the slice)", None),
    },
    fixes=(
        FixDoc(
            "device",
            "Slice one dimension in host memory, move that to device, and slice the rest there",
            "display-only",
            "The copy to device grows to the whole of the other dimensions; only the author "
            "knows whether that fits in device memory.",
        ),
    ),
    applies_to="TPU with the libtpu of JAX up to 0.11 (libtpu 0.0.17.1 and 0.0.42.1, measured with JAX 0.6.2 and 0.10.2); not JAX 0.12 (libtpu 0.0.50.1), not GPU",
    invalid=(example(_INVALID),),
    valid=(example(_VALID),),
    applies=_libtpu_slices_one_dimension,
    failure_texts={ASYNC_SLICE_DIMENSIONS: _SEVERAL_DIMENSIONS},
    backend=backend,
    backend_stage="copies",
)
