"""OFL1212 host-stack-of-inner-loop: an outer loop stacks, in host memory, what an inner loop
moved to host (nested scans under a remat offload policy), which neither backend can build."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from offload_fixer import codes
from offload_fixer.rules import FixDoc, Rule, TargetBehaviour
from offload_fixer.rules.examples import example
from offload_fixer.rules.ofl1207 import HOST_ASYNC_SHAPE, HOST_TUPLE_SHAPE, backend_failure

if TYPE_CHECKING:
    from offload_fixer.analysis.backend import Backend
    from offload_fixer.analysis.offloader import Failure

NESTED_STACK_HOST_CALL = replace(
    HOST_ASYNC_SHAPE, kind="tpu-nested-stack-host-call", code=codes.HOST_STACK_OF_INNER_LOOP
)
"""libtpu (0.0.17.1, 0.0.42.1, 0.0.50.1): host compute reading a host buffer that an outer loop
stacked from an inner loop's host output; the buffer has lost its host layout (OFL1207's
text, so XLA's text alone does not say which rule)."""
GPU_NESTED_STACK = replace(
    HOST_TUPLE_SHAPE, kind="gpu-nested-stack-tuple-shape", code=codes.HOST_STACK_OF_INNER_LOOP, variants=()
)
"""XLA:GPU (jax-cuda12-plugin 0.10.2, 0.12.0.1): an outer loop's tuple that carries a host buffer
stacked from an inner loop's host output loses the host memory space (OFL1207's text)."""

_INVALID = """
def loss(w, xs):
    policy = jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host")

    def step(h, x):
        return jnp.tanh(h @ w + x), None

    def chunk(h, rows):
        # The inner scan stacks each step's offloaded dot in host memory; the outer scan
        # stacks those stacks again, and the backward pass reads them back.
        return lax.scan(jax.checkpoint(step, policy=policy), h, rows)[0], None

    h, _ = lax.scan(chunk, jnp.zeros((8, 128)), xs)
    return jnp.sum(h)


f = jax.jit(jax.grad(loss))
args = (jax.ShapeDtypeStruct((128, 128), jnp.float32), jax.ShapeDtypeStruct((2, 3, 8, 128), jnp.float32))
"""

_VALID = """
def loss(w, xs):
    policy = jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host")

    def step(h, x):
        return jnp.tanh(h @ w + x), None

    # One scan over every step: the offloaded dots are stacked in host memory once.
    steps = xs.reshape(-1, *xs.shape[2:])
    h, _ = lax.scan(jax.checkpoint(step, policy=policy), jnp.zeros((8, 128)), steps)
    return jnp.sum(h)


f = jax.jit(jax.grad(loss))
args = (jax.ShapeDtypeStruct((128, 128), jnp.float32), jax.ShapeDtypeStruct((2, 3, 8, 128), jnp.float32))
"""

_WHY = (
    "An inner loop moves values to host and stacks them (a scan's outputs, or the residuals "
    "a remat offload policy saves), and an outer loop stacks those stacks again in a host "
    "buffer it carries. XLA:GPU loses the host memory space in the outer loop's tuple; "
    "libtpu compiles the stack but not host compute that reads it (a slice kept in host "
    "memory, as the backward pass takes), whose async host call finds the buffer without its "
    "host layout. Run one loop over every step (reshape the two loop dimensions into one), "
    "or move what the inner loop returns to device before the outer loop stacks it."
)
_SUMMARY = "An outer loop stacks in host memory what an inner loop moved to host"


def backend(b: Backend) -> Iterator[Failure]:
    """An outer loop that stacks, into a host buffer it carries, a host value an inner loop
    returned (nested scans whose ys are moved to host: a remat offload policy inside nested
    scans under ``grad``; the ``nested_scan_*`` and ``nested_stack_*`` probes). XLA:GPU loses
    the host memory space in the outer loop's tuple whatever reads the stack; libtpu compiles
    the stack but not host compute that reads it (a slice kept on host, or compute), whose
    async host call finds the buffer without its host layout. One stacked at the top level,
    or a stack of a value moved to host in the same loop body, compiles on both."""
    result = b.result
    for seed, ops in result.host_updates.items():
        if seed.op is None:
            continue
        depth = b.loop_depth(seed.op)
        for op in ops:
            if not 1 <= b.loop_depth(op) < depth or not b.update_from_host(op):
                continue
            if b.target == "gpu":
                yield b.failure(seed, op, GPU_NESTED_STACK)
            elif result.host_slices.get(seed) or result.host_compute.get(seed):
                yield b.failure(seed, op, NESTED_STACK_HOST_CALL)
            break


RULE = Rule(
    code=codes.HOST_STACK_OF_INNER_LOOP,
    summary=_SUMMARY,
    what_it_does=(
        "Reports a value moved to host inside an inner loop, stacked by it, and stacked "
        "again by an enclosing loop into a host buffer that loop carries: nested `scan`s "
        "whose outputs are moved to host, or a remat offload policy "
        "(`offload_dot_with_no_batch_dims`, `save_and_offload_only_these_names`) on a scan "
        "nested in another under `grad`."
    ),
    why_bad=(
        "Neither released backend builds it. XLA:GPU fails with an internal error on the "
        "outer loop's tuple shape. libtpu fails with an internal error on an async host call "
        "(`The async-start expects the shape of operand 0 to match the async shape`) once "
        "host compute reads the stacked buffer, which the backward pass of a remat offload "
        "does. One loop, or a stack in one loop body, compiles on both."
    ),
    targets={
        "tpu": TargetBehaviour(
            "error",
            "compilation fails when host compute reads the stacked buffer (libtpu 0.0.17.1, "
            "0.0.42.1 and 0.0.50.1); a stack only returned, or sliced straight to device, compiles",
            NESTED_STACK_HOST_CALL.placeholder(),
        ),
        "gpu": TargetBehaviour(
            "error",
            "compilation fails (jax-cuda12-plugin 0.10.2 and 0.12.0.1)",
            GPU_NESTED_STACK.placeholder(),
        ),
    },
    fixes=(
        FixDoc(
            "device",
            "Run one loop over every step, or move the inner loop's result to device before stacking it",
            "display-only",
            "Flattening the loops changes the program's structure, and moving the stack to "
            "device gives up the memory saving; only the author knows which fits.",
        ),
    ),
    applies_to="JAX >= 0.6 with a released TPU or GPU compiler (measured with JAX 0.6.2, 0.10.2 and 0.12.0.1)",
    invalid=(example(_INVALID),),
    valid=(example(_VALID),),
    failure_texts={
        NESTED_STACK_HOST_CALL: backend_failure(NESTED_STACK_HOST_CALL, _SUMMARY, _WHY),
        GPU_NESTED_STACK: backend_failure(GPU_NESTED_STACK, _SUMMARY, _WHY),
    },
    failure_fix="device",
    backend=backend,
    backend_stage="loops",
)
