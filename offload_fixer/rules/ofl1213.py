"""OFL1213 host-strided-slice-to-device: a strided slice of a host value (``x[::2]``) copied to
device, which every released compiler fails to build."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.model import Diagnostic, Role, Step
from offload_fixer.rules import FixDoc, Rule, ToolMessage, same_everywhere
from offload_fixer.rules.examples import example

if TYPE_CHECKING:
    from offload_fixer.analysis.backend import Backend, Op
    from offload_fixer.analysis.offloader import Failure
    from offload_fixer.static.rules import StaticHostCompute

STRIDED_COPY_SHAPE = msg.XlaMessage(
    "strided-host-copy-shape",
    "Expected instruction to have shape equal to {name} actual shape is ...",
    codes.HOST_STRIDED_SLICE_TO_DEVICE,
    status="INTERNAL",
    stable="Expected instruction to have shape equal to {name} actual shape is",
)
"""libtpu 0.0.17.1, 0.0.42.1 and 0.0.50.1 (after optimisation) and the CUDA plugins 0.10.2 and 0.12.0.1
(after layout assignment): the copy of a strided slice to device keeps the shape of the whole
host value (``{name}`` is that shape, ``f32[16,128]{1,0},``). A tuple's shape, which starts
with ``(``, is OFL1207's and OFL1212's text instead."""
_EXAMPLE_TEXT = "Expected instruction to have shape equal to f32[16,128]{1,0}, actual shape is f32[8,128]{1,0:T(8,128)}"
STRIDED_COPY_FAILS = ToolMessage(
    codes.HOST_STRIDED_SLICE_TO_DEVICE,
    "A strided slice of a host value is copied to device{subject}: the {compiler} compiler fails "
    "(INTERNAL: Expected instruction to have shape equal to the host value's shape, actual shape "
    "is the slice's)",
)

_INVALID = """
def every_other_row(x):
    # Every other row of the host-resident array, copied to device: a strided copy.
    return jax.device_put(x[::2], $DEVICE)


f = jax.jit(every_other_row, in_shardings=$HOST_SHARDING)
args = (jax.ShapeDtypeStruct((1024, 128), jnp.float32),)
"""

_INVALID_LANES = """
def even_columns(x):
    # Every other lane, from an offset: a stride in the last dimension fails alike.
    return jax.device_put(x[:, 1::2], $DEVICE)


f = jax.jit(even_columns, in_shardings=$HOST_SHARDING)
args = (jax.ShapeDtypeStruct((16, 256), jnp.float32),)
"""

_INVALID_FOLDED = """
def every_other_row_scaled(x):
    # A multiply by one is no host compute: XLA's simplifier removes it before placing the
    # copies, and the strided copy to device remains.
    return jax.device_put(x[::2] * 1.0, $DEVICE)


f = jax.jit(every_other_row_scaled, in_shardings=$HOST_SHARDING)
args = (jax.ShapeDtypeStruct((1024, 128), jnp.float32),)
"""

_VALID = """
def every_other_row(x):
    # Pair the rows up (a reshape is free) and take the first of each pair: a plain slice of
    # one dimension, copied to device as it is; half the rows reach device memory.
    pairs = x.reshape(x.shape[0] // 2, 2, x.shape[1])
    return jax.device_put(pairs[:, 0], $DEVICE)


f = jax.jit(every_other_row, in_shardings=$HOST_SHARDING)
args = (jax.ShapeDtypeStruct((1024, 128), jnp.float32),)
"""

_VALID_DEVICE_FIRST = """
def every_other_row(x):
    # Move the whole array to device, then slice it there (all of it reaches device memory).
    return jax.device_put(x, $DEVICE)[::2]


f = jax.jit(every_other_row, in_shardings=$HOST_SHARDING)
args = (jax.ShapeDtypeStruct((1024, 128), jnp.float32),)
"""

_VALID_ONE_ROW = """
def first_row(x):
    # A stride that leaves one element in its dimension is no stride: a plain copy.
    return jax.device_put(x[::16], $DEVICE)


f = jax.jit(first_row, in_shardings=$HOST_SHARDING)
args = (jax.ShapeDtypeStruct((16, 128), jnp.float32),)
"""

_WHY = (
    "A slice of a host value that is moved to device (or returned as a device output) becomes "
    "a copy of just the slice from host to device memory. With a stride (`x[::2]`, `x[:, 1::2]`) "
    "the released compilers build that copy with the shape of the whole host value, and the "
    "compile fails with an internal shape error. Copy a plain slice instead: reshape so the "
    "stride becomes a dimension of its own (`x.reshape(n // 2, 2, m)[:, 0]` for `x[::2]`; "
    "not for the last dimension, where libtpu aborts) and slice that, or move the value to "
    "device first and take the strided slice there."
)


def strided(b: Backend, op: Op) -> bool:
    """A slice with a stride other than 1 in a dimension where it keeps more than one element
    (``x[::16]`` of 16 rows keeps one row: a plain copy on every compiler)."""
    return any(stride != 1 and size > 1 for stride, size in zip(b.strides(op), b.piece_shape(op)))


def backend(b: Backend) -> Iterator[Failure]:
    """Each strided slice of a host value copied to device (moved there, or returned to a
    device output): every released compiler measured fails on it (libtpu 0.0.42.1 and
    0.0.50.1, the CUDA plugins 0.10.2 and 0.12.0.1). The same slice kept in host memory (a
    host output, or host compute before the move) compiles."""
    for seed, op in b.copies():
        if not b.is_update(op) and strided(b, op):
            yield b.failure(seed, op, STRIDED_COPY_SHAPE)


def _failure_text(subject: str | None, target: str) -> tuple[str, str]:
    where = f' ("{subject}")' if subject else ""
    return STRIDED_COPY_FAILS.format(subject=where, compiler=target.upper()), _WHY


def from_static_compute(site: StaticHostCompute) -> Iterator[Diagnostic]:
    """The source check's OFL1213: a strided slice of a host array on one device, taken by eager
    code, which JAX compiles as a copy of the slice to device (:mod:`offload_fixer.static.eager`)."""
    if site.kind != "strided slice":
        return
    op, where = site.ops[0]
    message, why = _failure_text(None, site.target)
    yield Diagnostic(
        code=RULE.code,
        severity=RULE.severity(site.target),
        target=site.target,
        message=message,
        explanation=why,
        origin=site.origin,
        trace=(site.start, Step(op, Role.HOST_COMPUTE, where)),
        span=where,
        fixes=(RULE.fix_option("device"),),
        function=site.function,
        source="static",
        source_sha256=site.source_sha256,
    )


RULE = Rule(
    code=codes.HOST_STRIDED_SLICE_TO_DEVICE,
    summary="A strided slice of a host value is copied to device",
    what_it_does=(
        "Reports a slice with a stride (`x[::2]`, `x[:, 1::2]`) of a value in host memory "
        "that is moved to device or returned as a device output, so that XLA copies just the "
        "strided slice from host to device memory."
    ),
    why_bad=(
        "XLA turns a slice that feeds a move to device into a host-to-device copy of the slice. "
        "Neither released backend builds the copy of a strided slice: libtpu and XLA:GPU both "
        "fail with an internal error, the copy keeping the shape of the whole host value. A "
        "stride-1 slice, or a stride that leaves one element, is copied fine."
    ),
    targets=same_everywhere(
        "error",
        "compilation fails with an internal error (libtpu 0.0.42.1 and 0.0.50.1, jax-cuda12-plugin "
        "0.10.2 and 0.12.0.1)",
        _EXAMPLE_TEXT,
    ),
    fixes=(
        FixDoc(
            "device",
            "Move the host value to device before the strided slice",
            "safe",
            "Values are unchanged and the program compiles, but the whole value reaches device "
            "memory (measured: 3.1x the device memory of the reshaped slice on libtpu for a "
            "(1024, 128) value); where the stride is not in the last dimension, reshaping it "
            "into a dimension of its own and slicing that copies only the slice.",
        ),
    ),
    applies_to=(
        "Every JAX version with a released TPU or GPU compiler (measured with JAX 0.10.2 and 0.12.0.1; "
        "libtpu 0.0.17.1 of JAX 0.6.2 fails alike on `lax.slice` with strides, while JAX 0.6.2 lowers "
        "`x[::2]` as a gather instead)"
    ),
    invalid=(example(_INVALID), example(_INVALID_LANES), example(_INVALID_FOLDED)),
    valid=(example(_VALID), example(_VALID_DEVICE_FIRST), example(_VALID_ONE_ROW)),
    from_static_compute=from_static_compute,
    backend=backend,
    backend_stage="copies",
    failure_texts={STRIDED_COPY_SHAPE: _failure_text},
)
