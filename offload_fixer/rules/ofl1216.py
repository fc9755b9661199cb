"""OFL1216 host-aliased-into-one-result: a custom call (a Pallas kernel) with several results
aliases a value in host memory into one of them (``input_output_aliases``)."""

from __future__ import annotations

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.jax_compat import Spelling, xla_generation
from offload_fixer.rules import FixDoc, Rule, TargetBehaviour, ToolMessage
from offload_fixer.rules.examples import tpu_only

COMPILER_ABORTS = ToolMessage(
    codes.HOST_ALIASED_INTO_ONE_RESULT,
    "{compiler} aborts compiling this: {subject} aliases a host value into one of its results ({xla})",
)
"""The compiler's CHECK, which ends the compiling process rather than raising an error."""
CHECKS = (
    "host_offload_utils.cc:98 Check failed: !tmp_shape_index.empty(), or host_offloader.cc:343 "
    "Check failed: output_shape.has_layout() where the call's whole tuple is returned"
)
"""Where libtpu 0.0.42.1 fails (``XlaGeneration.tpu_custom_call_tuple_alias_aborts``)."""
KERNEL_ONLY = (
    "a Mosaic (TPU) kernel: JAX lowers no Pallas TPU kernel for CUDA, and no CUDA program reaching this was measured"
)

_KERNEL = """
def scale_rows(cache_ref, rows_ref, cache_out_ref, scaled_ref):
    scaled_ref[...] = rows_ref[...] * 2.0  # the cache is kept where it lies (aliased)


def cached_scale(cache, rows):
    anywhere = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(
        scale_rows,
        out_shape=(jax.ShapeDtypeStruct(cache.shape, cache.dtype), jax.ShapeDtypeStruct(rows.shape, rows.dtype)),
        in_specs=[anywhere, pl.BlockSpec()],
        out_specs=(anywhere, pl.BlockSpec()),
        input_output_aliases={0: 0},
    )(cache, rows)
"""

_INVALID = (
    _KERNEL
    + """

def step(cache, rows):
    cache, scaled = cached_scale(cache, rows)  # `cache` arrives in host memory
    return cache, jax.device_put(scaled, $HOST)


f = jax.jit(step, in_shardings=($HOST_SHARDING, None))
args = (jax.ShapeDtypeStruct((8, 128), jnp.float32),) * 2
"""
)

_VALID = (
    _KERNEL
    + """

def step(cache, rows):
    cache, scaled = cached_scale(jax.device_put(cache, $DEVICE), rows)  # the kernel gets the cache in HBM
    return cache, jax.device_put(scaled, $HOST)


f = jax.jit(step, in_shardings=($HOST_SHARDING, None))
args = (jax.ShapeDtypeStruct((8, 128), jnp.float32),) * 2
"""
)


def _aborts(subject: str | None, target: str) -> tuple[str, str]:
    compiler = xla_generation().compiler(target) or target.upper()
    call = f'the custom call "{subject}"' if subject else "a custom call"
    return COMPILER_ABORTS.format(compiler=compiler, subject=call, xla=CHECKS), (
        "A kernel with several outputs aliases an input in host memory into one of them. The "
        "host offloader follows the call with the input's shape index instead of the output's "
        f"and {compiler} fails a CHECK there: the compiling process aborts, with no error to "
        "catch. The libtpu of JAX 0.12 (0.0.50.1) rejects the same program with error 1200 "
        "instead, and no release compiles it: move the value to device before the kernel (and "
        "back to host after it, if it lives there)."
    )


def _aborting(sp: Spelling) -> bool:
    """Whether the libtpu that ``jax[tpu]`` installs with this JAX aborts on the pattern."""
    return xla_generation(sp.version).tpu_custom_call_tuple_alias_aborts


RULE = Rule(
    code=codes.HOST_ALIASED_INTO_ONE_RESULT,
    summary="A kernel with several outputs aliases a host value into one of them",
    what_it_does=(
        "Reports a custom call with several results -- a Pallas kernel with a tuple of outputs "
        "-- whose `input_output_aliases` give a value in host memory (a host argument, a value "
        "moved to host) one of the results' buffers."
    ),
    why_bad=(
        "XLA's host offloader follows such a call with the aliased input's shape index rather "
        "than the result's (an open TODO in XLA, b/342650757). libtpu 0.0.42.1 (JAX 0.10.2) "
        "fails a CHECK there and the compiling process aborts -- the program dies with "
        "SIGABRT, no exception to catch; libtpu 0.0.50.1 (JAX 0.12) reads each of the call's "
        "results as the host value and rejects the program with error 1200, even where only a "
        "result the value is not aliased into is returned. A kernel's operands must be in "
        "device memory anyway: with host outputs, Mosaic cannot compile the kernel."
    ),
    targets={
        "tpu": TargetBehaviour(
            "error",
            "libtpu 0.0.42.1 aborts on a failed check (no error to catch); libtpu 0.0.50.1 rejects "
            "the program with error 1200 (OFL1200)",
            msg.ALIASED_INTO_ONE_RESULT.placeholder(),
        ),
        "gpu": TargetBehaviour("info", "not measured: " + KERNEL_ONLY, None),
    },
    fixes=(
        FixDoc(
            "device",
            "Move the value to device before the kernel",
            "display-only",
            "Which kernel input to move, and whether its result goes back to host after, only the author knows.",
        ),
    ),
    applies_to="TPU with the libtpu of JAX 0.10.2 (measured); JAX 0.12's libtpu reports OFL1200 instead",
    invalid=(tpu_only(_INVALID, KERNEL_ONLY),),
    valid=(tpu_only(_VALID, KERNEL_ONLY),),
    applies=_aborting,
    failure_texts={msg.ALIASED_INTO_ONE_RESULT: _aborts},
)
