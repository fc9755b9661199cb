"""How findings become diagnostics: one per offending output, one per place of host compute."""

import jax
import jax.numpy as jnp
import pytest

from offload_fixer import analyze, jax_compat


@pytest.mark.skipif(not jax_compat.host_memory_on_this_backend(), reason="needs pinned_host memory for in_shardings")
def test_one_computation_over_a_streamed_pytree_is_one_host_compute_diagnostic():
    host = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")

    def scale(tree):
        return jax.tree.map(lambda leaf: leaf * 2.0, tree)

    args = ({"a": jax.ShapeDtypeStruct((4,), jnp.float32), "b": jax.ShapeDtypeStruct((4,), jnp.float32)},)
    lowered = jax.jit(scale, in_shardings=({"a": host, "b": host},)).trace(*args).lower(lowering_platforms=("tpu",))
    report = analyze(lowered)
    (compute,) = report.by_code("OFL1201")
    assert "tree['b']" in compute.explanation or "tree['a']" in compute.explanation
    # each output is its own problem (and its own fix)
    assert sorted(d.output_path for d in report.by_code("OFL1200")) == ["['a']", "['b']"]


@pytest.mark.skipif(not jax_compat.host_memory_on_this_backend(), reason="needs pinned_host memory for in_shardings")
def test_a_loop_dot_mixing_host_and_device_memory_is_predicted_to_abort_libtpu():
    """libtpu fails a CHECK on it: the prediction says ``aborted``, not ``rejected``, so that it
    compares equal with the released compiler's verdict."""
    from jax import lax

    cpu = jax.devices()[0]
    host = jax.sharding.SingleDeviceSharding(cpu, memory_kind="pinned_host")
    device = jax.sharding.SingleDeviceSharding(cpu, memory_kind="device")

    def loop_over_host_weights(w, x):
        return lax.fori_loop(0, 3, lambda i, h: h @ w, x)

    args = (jax.ShapeDtypeStruct((128, 128), jnp.float32), jax.ShapeDtypeStruct((8, 128), jnp.float32))
    jitted = jax.jit(loop_over_host_weights, in_shardings=(host, device), out_shardings=host)
    report = analyze(jitted.trace(*args).lower(lowering_platforms=("tpu",)), target="tpu")
    assert report.predicted is not None
    assert (report.predicted.outcome, report.predicted.code) == ("aborted", "OFL1207")
