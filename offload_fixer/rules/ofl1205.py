"""OFL1205 host-value-in-while-condition: a while loop's condition is computed from a value in
host memory."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.rules import FixDoc, Rule, TargetBehaviour, ToolMessage
from offload_fixer.rules.examples import example
from offload_fixer.rules.ofl1204 import UNPINNED_PARAMETER
from offload_fixer.rules.ofl1207 import HOST_TUPLE_SHAPE, backend_failure

if TYPE_CHECKING:
    from offload_fixer.analysis.backend import Backend
    from offload_fixer.analysis.offloader import Failure

COMPILER_ABORTS = ToolMessage(codes.HOST_VALUE_IN_WHILE_CONDITION, "XLA aborts: {xla}")
"""XLA's failed check, which ends the compiling process rather than raising an error."""

TPU_HOST_LOOP = replace(UNPINNED_PARAMETER, kind="tpu-host-loop-fusion", code=codes.HOST_VALUE_IN_WHILE_CONDITION)
"""libtpu 0.0.50.1: a loop the host offloader put in host memory as a whole (its condition
decided by a host value), whose body fuses compute on a carried value: the fusion's parameter
is in device memory, its operand in host memory (S(5)). OFL1204's text, so XLA's text alone
does not say which rule."""
GPU_HOST_LOOP = replace(
    HOST_TUPLE_SHAPE, kind="gpu-host-loop-tuple-shape", code=codes.HOST_VALUE_IN_WHILE_CONDITION, variants=()
)
"""jax-cuda12-plugin 0.12.0.1: the same loop after layout assignment: the while's tuple is all
host memory (S(5)) where its body and condition expect device memory (OFL1207's and
OFL1212's text)."""

_INVALID = """
@jax.jit
def f(rows):
    history = jax.device_put(jnp.zeros_like(rows), $HOST)

    def keep_going(state):
        i, history = state
        return (i < rows.shape[0]) & (jnp.sum(history) < 1e6)  # reads the offloaded buffer

    def write_row(state):
        i, history = state
        row = jax.device_put(rows[i] * 2, $HOST)
        return i + 1, lax.dynamic_update_slice(history, row[None], (i, 0))

    return lax.while_loop(keep_going, write_row, (0, history))[1]


args = (jnp.ones((4, 8)),)
"""

_VALID = """
@jax.jit
def f(rows):
    history = jax.device_put(jnp.zeros_like(rows), $HOST)

    def keep_going(state):
        i, total, history = state
        return (i < rows.shape[0]) & (total < 1e6)  # the running total stays on device

    def write_row(state):
        i, total, history = state
        row = rows[i] * 2
        written = lax.dynamic_update_slice(history, jax.device_put(row, $HOST)[None], (i, 0))
        return i + 1, total + jnp.sum(row), written

    return lax.while_loop(keep_going, write_row, (0, 0.0, history))[2]


args = (jnp.ones((4, 8)),)
"""


def _condition_compute(subject: str | None, target: str) -> tuple[str, str]:
    return msg.WHILE_CONDITION_COMPUTE.format(name=subject), (
        "A host buffer carried by a while loop is computed on in the loop's condition; XLA "
        "only allows moving host data around there."
    )


def _condition_root(subject: str | None, target: str) -> tuple[str, str]:
    return COMPILER_ABORTS.format(xla=msg.WHILE_CONDITION_ROOT.format()), (
        "A value in host memory decides a while loop's condition. The released compilers' "
        "host offloader fails a CHECK when its walk reaches the condition's result, and the "
        "compiling process aborts with no error to catch. Keep what the condition reads on "
        "device (a running count or total carried beside the host buffer)."
    )


_HOST_LOOP_WHY = (
    "A value in host memory decides a while loop's condition. The compilers of JAX 0.12 "
    "put the whole loop in host memory then, every value it carries included, and the "
    "backend cannot build the loop's device compute on them. Keep what the condition reads "
    "on device (move the host value to device before the loop, or carry a count or total "
    "on device beside it)."
)
_FAILURE_TEXTS = {
    msg.WHILE_CONDITION_COMPUTE: _condition_compute,
    msg.WHILE_CONDITION_ROOT: _condition_root,
    TPU_HOST_LOOP: backend_failure(
        TPU_HOST_LOOP, "A loop decided by a host value lands in host memory", _HOST_LOOP_WHY
    ),
    GPU_HOST_LOOP: backend_failure(
        GPU_HOST_LOOP, "A loop decided by a host value lands in host memory", _HOST_LOOP_WHY
    ),
}


def backend(b: Backend) -> Iterator[Failure]:
    """JAX 0.12's compilers: each loop the host offloader put in host memory as a whole (its
    condition decided by a host value) fails in the backend when no loop result reaches a
    device output (error 1200 comes first then): libtpu on the body's fusion reading a carried
    value (the ``host_parameter_in_loop_condition_*_host_output`` probes), XLA:GPU on the
    loop's tuple shape. Not where the host offloader already rejects compute in that condition
    (an update into a host buffer the loop carries: ``while_condition_on_host``)."""
    if any(failure.code == codes.HOST_VALUE_IN_WHILE_CONDITION for failure in b.result.failures):
        return
    message = TPU_HOST_LOOP if b.target == "tpu" else GPU_HOST_LOOP
    for seed, loop in b.host_loops():
        yield b.failure(seed, loop, message)


RULE = Rule(
    code=codes.HOST_VALUE_IN_WHILE_CONDITION,
    summary="A while loop's condition is computed from a value in host memory",
    what_it_does=(
        "Reports a loop whose condition reads a value that lives in host memory -- a "
        "carried buffer that streams to host, a host argument -- and computes the loop's "
        "predicate from it."
    ),
    why_bad=(
        "The released compilers' host offloader follows host values into the loop "
        "condition, and when the walk reaches the condition's result the compilers of JAX "
        "up to 0.11 fail a CHECK: the compiling process aborts, with no exception and no "
        "error message for the program to catch. Those of JAX 0.12 go on from the whole "
        "loop, which lands in host memory with every value it carries: error 1200 where a "
        "result of the loop is returned as a device output, otherwise the backend fails to "
        "build the loop (an internal error). Where the loop carries a host buffer that it "
        "updates, the host offloader rejects the compute in the condition first, naming its "
        "instruction."
    ),
    targets={
        "tpu": TargetBehaviour(
            "error",
            "libtpu 0.0.17.1 and 0.0.42.1 (JAX 0.6.2, 0.10.2) abort on a failed check (no error to "
            "catch); libtpu 0.0.50.1 (JAX 0.12) rejects the program: error 1200 when a loop "
            "result reaches a device output, else 'INTERNAL: Shape mismatch between parameter "
            "number 0 and its operand in %...fusion' (or, for an update into a host buffer the "
            "loop carries, an error naming the condition's instruction)",
            msg.WHILE_CONDITION_ROOT.placeholder(),
        ),
        "gpu": TargetBehaviour(
            "error",
            "jax-cuda12-plugin 0.10.2 aborts on a failed check (no error to catch); 0.12.0.1 "
            "rejects the program: error 1200 when a loop result reaches a device output, else "
            "'INTERNAL: Expected instruction to have shape equal to (...), actual shape is "
            "(...S(5)...)' on the while (or, for an update into a host buffer the loop "
            "carries, an error naming the condition's instruction)",
            msg.WHILE_CONDITION_ROOT.placeholder(),
        ),
    },
    fixes=(
        FixDoc(
            "device",
            "Decide the loop condition from a value kept on device",
            "display-only",
            "The condition has to be rewritten in terms of other state; only the author knows which.",
        ),
    ),
    applies_to="Every JAX version",
    invalid=(example(_INVALID),),
    valid=(example(_VALID),),
    failure_texts=_FAILURE_TEXTS,
    backend=backend,
    backend_stage="loops",
)
