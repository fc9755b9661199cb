"""OFL1207 host-compute-the-backend-cannot-build: host compute the released compiler's backend
cannot compile: XLA's texts for it, and which host compute fails on which backend."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.rules import FailureText, FixDoc, Rule, TargetBehaviour, ToolMessage
from offload_fixer.rules.examples import example

if TYPE_CHECKING:
    from offload_fixer.analysis.backend import Backend, Op
    from offload_fixer.analysis.offloader import Failure, Seed

FUSION_SHAPE = msg.XlaMessage(
    "gpu-host-fusion-shape",
    "Fused computation shape (...) is not equal to the fusion shape (...:S(5))",
    codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE,
    status="INTERNAL",
    stable="Fused computation shape (",
)
"""XLA:GPU emits a dot in host memory as a GEMM fusion whose shape loses the host memory space."""
HOST_COMPUTE_ALIAS = msg.XlaMessage(
    "tpu-host-compute-alias",
    "Check failed: host_execute_operand_subshape == ShapeUtil::GetSubshape(host_instr->shape(), "
    "host_execute_output_shape_index)",
    codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE,
    severity="crash",
    status="",
    stable="Check failed: host_execute_operand_subshape ==",
)
_ASYNC_SHAPE_0_0_50 = "(opcode: async-start) expects the shape of operand 0 to match the async shape"
"""libtpu 0.0.50.1's wording of the async-start shape check (it names the host call first)."""
HOST_ASYNC_SHAPE = msg.XlaMessage(
    "tpu-host-async-shape",
    "The async-start expects the shape of operand 0 to match the async shape at index {{0}} (... vs ...S(5))",
    codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE,
    status="INTERNAL",
    stable="The async-start expects the shape of operand 0 to match the async shape",
    variants=(_ASYNC_SHAPE_0_0_50,),
)
"""How libtpu also fails on a loop's dot mixing host and device memory, once the loop is
differentiated (the host compute becomes an async host call)."""
CUSTOM_FUSION_BACKEND_CONFIG = msg.XlaMessage(
    "tpu-host-custom-fusion",
    "RET_CHECK failure (.../cpu/thunk_emitter.cc) instruction->has_backend_config() Fusion must have backend config",
    codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE,
    status="INTERNAL",
    stable="instruction->has_backend_config() Fusion must have backend config",
)
_GPU_SCATTER_VERIFIER = (
    "!(operand_memory_space == Layout::kHostMemorySpace && result_memory_space == Layout::kDefaultMemorySpace)"
)
"""XLA:GPU's verifier on the same scatter when it is the only output (a RET_CHECK failure)."""
HOST_TUPLE_SHAPE = msg.XlaMessage(
    "gpu-host-tuple-shape",
    "Expected instruction to have shape equal to (...), actual shape is (...S(5)...)",
    codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE,
    status="INTERNAL",
    stable="Expected instruction to have shape equal to (",
    variants=(_GPU_SCATTER_VERIFIER,),
)
"""XLA:GPU rewrites a single-update scatter in host memory into a dynamic slice and a select
whose tuple loses the host memory space."""

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


_LOOP_DOT_WHY = (
    "A dot inside a loop whose operand lives in host memory while another is in device memory "
    "becomes host compute tied to a device loop buffer, which libtpu cannot build: it fails a "
    "CHECK in its host-compute alias assignment (the compiling process aborts) or, once the "
    "loop is differentiated, with an internal error on the async host call. Move the host "
    "operand to device before the loop (or inside it, before the dot)."
)
_FAILURE_TEXTS = {
    msg.SHAPE_CHANGING_ANNOTATION: _shape_changing_annotation,
    FUSION_SHAPE: backend_failure(
        FUSION_SHAPE,
        "A dot computed in host memory cannot be compiled for GPU",
        (
            "XLA turns device compute on a host value into host compute, but XLA:GPU emits a dot as a "
            "GEMM fusion whose shape loses the host memory space, and the compile fails with an "
            "internal error. Move the operand back to device before the dot."
        ),
    ),
    HOST_TUPLE_SHAPE: backend_failure(
        HOST_TUPLE_SHAPE,
        "A scatter computed in host memory cannot be compiled for GPU",
        (
            "XLA:GPU rewrites a single-update scatter (a dynamic index, or an accumulating update) into "
            "a dynamic slice and a select whose result loses the host memory space, and the compile "
            "fails with an internal error. Move the buffer back to device before updating it."
        ),
    ),
    HOST_COMPUTE_ALIAS: backend_failure(
        HOST_COMPUTE_ALIAS, "A dot in a loop body mixes host and device memory", _LOOP_DOT_WHY
    ),
    HOST_ASYNC_SHAPE: backend_failure(
        HOST_ASYNC_SHAPE, "A dot in a loop body mixes host and device memory", _LOOP_DOT_WHY
    ),
    CUSTOM_FUSION_BACKEND_CONFIG: backend_failure(
        CUSTOM_FUSION_BACKEND_CONFIG,
        "A gather or multi-index scatter in host memory cannot be compiled for TPU",
        (
            "libtpu emits host compute of gathers and scatters of several updates as custom fusions "
            "that its host backend has no configuration for, and the compile fails with an internal "
            "error. Move the operand back to device first."
        ),
    ),
}


DOTS = frozenset({"dot_general", "dot", "convolution"})
"""What XLA emits as a dot (a GEMM fusion on GPU)."""


def backend(b: Backend) -> Iterator[Failure]:
    """Host compute the target's backend cannot build, measured on the released compilers
    (the probes ``matmul_on_host``, ``dynamic_index_set``, ``scan_over_host_layers``,
    ``gather_on_host`` and their neighbours)."""
    for seed, op in b.host_compute():
        message = _tpu_failure(b, op) if b.target == "tpu" else _gpu_failure(b, op, seed)
        if message is not None:
            yield b.failure(seed, op, message)


def _gpu_failure(b: Backend, op: Op, seed: Seed) -> msg.XlaMessage | None:
    """XLA:GPU: a dot; a single-update scatter that is not a constant-index set, on a value
    moved to host outside any loop (a host parameter updated so, or a host buffer updated in
    a loop body, compiles: the ``scatter_into_host_parameter`` and
    ``scatter_in_scan_into_host_buffer`` probes)."""
    kind = b.kind(op)
    if kind in DOTS:
        return FUSION_SHAPE
    if (
        kind == "scatter"
        and b.single_update(op)
        and not b.constant_index_set(op)
        and seed.kind == "move_to_host"
        and not b.in_loop_body(op)
    ):
        return HOST_TUPLE_SHAPE
    return None


def _tpu_failure(b: Backend, op: Op) -> msg.XlaMessage | None:
    """libtpu: a dot in a loop body with an operand in device memory (its host-compute alias
    assigner aborts); a gather (from libtpu 0.0.42.1: ``XlaGeneration.tpu_builds_host_gather``),
    or a scatter of several updates (a custom fusion without a backend config)."""
    kind = b.kind(op)
    if kind in DOTS and b.in_loop_body(op) and b.reads_device_memory(op):
        return HOST_COMPUTE_ALIAS
    if (kind == "gather" and not b.xla.tpu_builds_host_gather) or (kind == "scatter" and not b.single_update(op)):
        return CUSTOM_FUSION_BACKEND_CONFIG
    return None


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
    backend=backend,
    backend_stage="host compute",
    failure_texts=_FAILURE_TEXTS,
)
