"""OFL1207 host-compute-the-backend-cannot-build: host compute the released compiler's backend
cannot compile (the failures :mod:`offload_fixer.analysis.backend` predicts)."""

from __future__ import annotations

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.rules import FailureText, FixDoc, Rule, TargetBehaviour, ToolMessage
from offload_fixer.rules.examples import example

COMPILER_FAILS = ToolMessage(codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE, "XLA fails: {xla}")
BACKEND_FAILS = ToolMessage(
    codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE, "{summary}{subject}: the {compiler} compiler fails ({status}: {xla})"
)
"""What a backend cannot build (``summary``), quoting the message the compiler fails with."""


def backend_failure(xla: msg.XlaMessage, summary: str, why: str) -> FailureText:
    """What a backend cannot build, and why, quoting the message it fails with."""

    def text(subject: str | None, target: str) -> tuple[str, str]:
        where = f' ("{subject}")' if subject else ""
        message = BACKEND_FAILS.format(
            summary=summary, subject=where, compiler=target.upper(), status=xla.status, xla=xla.placeholder()
        )
        return message, why

    return text


_INVALID = """
def mix(weights, x):
    def layer(h, w):
        # `w` is a slice of the host-resident weights: the dot runs in host memory.
        return jnp.tanh(h @ w), None

    h, _ = lax.scan(layer, x, weights)
    return h


f = jax.jit(mix, in_shardings=($HOST_SHARDING, None), out_shardings=$HOST_SHARDING)
args = (jax.ShapeDtypeStruct((3, 128, 128), jnp.float32), jax.ShapeDtypeStruct((8, 128), jnp.float32))
"""

_VALID = """
def mix(weights, x):
    weights = jax.device_put(weights, $DEVICE)  # stream the weights in first

    def layer(h, w):
        return jnp.tanh(h @ w), None

    h, _ = lax.scan(layer, x, weights)
    return h


f = jax.jit(mix, in_shardings=($HOST_SHARDING, None))
args = (jax.ShapeDtypeStruct((3, 128, 128), jnp.float32), jax.ShapeDtypeStruct((8, 128), jnp.float32))
"""


def _shape_changing_annotation(subject: str | None, target: str) -> tuple[str, str]:
    return COMPILER_FAILS.format(xla=msg.SHAPE_CHANGING_ANNOTATION.format()), (
        "A placement annotation declares another shape than its operand's. XLA removes the "
        "move once it has placed the value, replacing its uses with the operand, and that "
        "replacement rejects the differing shape. JAX never writes such an annotation; "
        "hand-written or rewritten StableHLO can."
    )


_FAILURE_TEXTS = {
    msg.SHAPE_CHANGING_ANNOTATION: _shape_changing_annotation,
    msg.FUSION_SHAPE: backend_failure(
        msg.FUSION_SHAPE,
        "A dot computed in host memory cannot be compiled for GPU",
        (
            "XLA turns device compute on a host value into host compute, but XLA:GPU emits a dot as a "
            "GEMM fusion whose shape loses the host memory space, and the compile fails with an "
            "internal error. Move the operand back to device before the dot."
        ),
    ),
    msg.HOST_TUPLE_SHAPE: backend_failure(
        msg.HOST_TUPLE_SHAPE,
        "A scatter computed in host memory cannot be compiled for GPU",
        (
            "XLA:GPU rewrites a single-update scatter (a dynamic index, or an accumulating update) into "
            "a dynamic slice and a select whose result loses the host memory space, and the compile "
            "fails with an internal error. Move the buffer back to device before updating it."
        ),
    ),
    msg.HOST_COMPUTE_ALIAS: backend_failure(
        msg.HOST_COMPUTE_ALIAS,
        "A dot in a loop body mixes host and device memory",
        (
            "A dot inside a loop whose operand lives in host memory while another is in device memory "
            "becomes host compute tied to a device loop buffer, which libtpu cannot build: it fails a "
            "CHECK in its host-compute alias assignment (the compiling process aborts) or, once the "
            "loop is differentiated, with an internal error on the async host call. Move the host "
            "operand to device before the loop (or inside it, before the dot)."
        ),
    ),
    msg.CUSTOM_FUSION_BACKEND_CONFIG: backend_failure(
        msg.CUSTOM_FUSION_BACKEND_CONFIG,
        "A gather or multi-index scatter in host memory cannot be compiled for TPU",
        (
            "libtpu emits host compute of gathers and scatters of several updates as custom fusions "
            "that its host backend has no configuration for, and the compile fails with an internal "
            "error. Move the operand back to device first."
        ),
    ),
}


RULE = Rule(
    code=codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE,
    summary="Host compute the released compiler's backend cannot compile",
    what_it_does=(
        "Reports device compute on host data that the target's released compiler accepts "
        "in its host offloader but cannot build afterwards: on GPU a dot (or a scatter with "
        "a dynamic index or an accumulating update); on TPU a dot in a loop body with an "
        "operand in device memory, a gather, or a scatter of several updates. Also a "
        "placement annotation that changes its operand's shape."
    ),
    why_bad=(
        "XLA turns device compute on a host value into host compute, but each backend "
        "builds only some host compute: the rest fails with an internal error or aborts the "
        "compiling process. These cases were measured on the released compilers "
        "(libtpu, jax-cuda12-plugin)."
    ),
    targets={
        "tpu": TargetBehaviour("error", "compilation fails with an internal error, or the compiler aborts", None),
        "gpu": TargetBehaviour("error", "compilation fails with an internal error", None),
    },
    fixes=(
        FixDoc(
            "device",
            "Move the operand back to device before the compute",
            "safe",
            "Values are unchanged and the compute runs on the accelerator; only where the operand lives changes.",
        ),
    ),
    applies_to="Every JAX version with a released TPU or GPU compiler",
    invalid=(example(_INVALID),),
    valid=(example(_VALID),),
    failure_texts=_FAILURE_TEXTS,
)
