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


@pytest.mark.skipif(not jax_compat.host_memory_on_this_backend(), reason="needs pinned_host memory for in_shardings")
@pytest.mark.parametrize("target", ["tpu", "gpu"])
def test_a_function_called_on_host_and_on_device_memory_returns_to_its_own_caller(target: str):
    """JAX slices a scan's stack through one ``dynamic_index_in_dim`` function: the forward
    loop calls it on the host stack (each slice moved to device), the backward loop on the
    device residuals. XLA inlines each call before its host offloader runs, so the host slice
    does not reach the backward loop: only the update is host compute (libtpu 0.0.42.1 and
    0.0.50.1 and the CUDA plugins 0.10.2 and 0.12.0.1 compile it and warn of the subtract
    alone), no slice stays on host (OFL1206) and no backward dot mixes memories (OFL1207)."""
    from jax import lax

    cpu = jax.devices()[0]
    host = jax.sharding.SingleDeviceSharding(cpu, memory_kind="pinned_host")
    device = jax.sharding.SingleDeviceSharding(cpu, memory_kind="device")

    def loss(layers, x):
        def layer(h, w):
            return jnp.tanh(h @ jax.device_put(w, jax_compat.memory_move_target("device"))), None

        return jnp.mean(lax.scan(layer, x, layers)[0] ** 2)

    def sgd(layers, x):
        value, grads = jax.value_and_grad(loss)(layers, x)
        return layers - 0.1 * grads, value

    args = (jax.ShapeDtypeStruct((3, 8, 8), jnp.float32), jax.ShapeDtypeStruct((16, 8), jnp.float32))
    jitted = jax.jit(sgd, in_shardings=(host, device), out_shardings=(host, None))
    lowered = jitted.trace(*args).lower(lowering_platforms=("tpu" if target == "tpu" else "cuda",))
    report = analyze(lowered, target=target)
    assert report.predicted is not None and report.predicted.outcome == "compiled"
    assert {d.code for d in report.diagnostics} == {"OFL1201"}
    (compute,) = report.by_code("OFL1201")
    assert "1 computation(s) (sub" in compute.explanation, compute.explanation
