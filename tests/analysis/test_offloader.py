"""The host offloader's walk through a custom call that aliases a host value into one of its
several results (a Pallas kernel's output tuple), judged by the installed libtpu."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from offload_fixer import analyze, jax_compat

pytestmark = pytest.mark.skipif(
    not jax_compat.host_memory_on_this_backend(), reason="a kernel's host argument needs pinned_host memory"
)


def _kernel(cache_ref, x_ref, cache_out_ref, stats_ref):
    del cache_ref, x_ref, cache_out_ref, stats_ref  # the cache is updated where it lies


def _kernel_outputs(cache, x, aliased_into):
    from jax.experimental import pallas as pl

    anywhere = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(
        _kernel,
        out_shape=(jax.ShapeDtypeStruct(cache.shape, cache.dtype), jax.ShapeDtypeStruct(x.shape, x.dtype)),
        in_specs=[anywhere, anywhere],
        out_specs=(anywhere, anywhere),
        input_output_aliases={0: aliased_into},
    )(cache, x)


STEPS = {
    "both-returned": lambda cache, x: _kernel_outputs(cache, x, 0),
    "aliased-returned": lambda cache, x: _kernel_outputs(cache, x, 0)[0],
    "other-returned": lambda cache, x: _kernel_outputs(cache, x, 0)[1],
    "other-computed-on": lambda cache, x: _kernel_outputs(cache, x, 1)[0] * 2,
}


@pytest.mark.parametrize("name", sorted(STEPS))
def test_a_host_value_aliased_into_one_result_of_several_reaches_each(name, tpu_compiler):
    """XLA follows the call with the operand's shape index, not the aliased result's: libtpu
    0.0.50.1 rejects a returned result the value is not aliased into too (error 1200), and the
    analysis says so (``XlaGeneration.custom_call_alias_reaches_every_result``); libtpu
    0.0.42.1 dies on a CHECK at the tuple's first element read or on the whole tuple's
    layout, which the analysis predicts as OFL1216 (``XlaGeneration.tpu_custom_call_tuple_alias_aborts``)."""
    mesh = jax.sharding.Mesh(jax.devices()[:1], ("x",))
    host = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(), memory_kind="pinned_host")
    cache = jax.ShapeDtypeStruct((8, 128), jnp.float32, sharding=host)
    x = jax.ShapeDtypeStruct((8, 128), jnp.float32, sharding=host.with_memory_kind("device"))
    lowered = jax.jit(STEPS[name]).trace(cache, x).lower(lowering_platforms=("tpu",))
    verdict = tpu_compiler.judge(lowered)
    predicted = analyze(lowered, "tpu").predicted
    if jax_compat.xla_generation().custom_call_alias_reaches_every_result:
        assert (verdict.outcome, verdict.code) == (predicted.outcome, predicted.code) == ("rejected", "OFL1200")
        assert verdict.instruction == predicted.instruction
    else:
        assert verdict.outcome == predicted.outcome == "aborted"
        assert predicted.code == "OFL1216"
        # The line-98 CHECK is OFL1205's text too: that verdict names no one code.
        shared = "host_offload_utils.cc:98]" in verdict.message
        assert verdict.code == (None if shared else "OFL1216"), verdict.message
        assert "host_offload_utils.cc:98] Check failed: !tmp_shape_index.empty()" in verdict.message or (
            "host_offloader.cc:343] Check failed: output_shape.has_layout()" in verdict.message
        )
