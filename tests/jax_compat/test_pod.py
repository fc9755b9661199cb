"""A program's view of a TPU pod it does not run on: JAX answers as process 0 of the pod, and
what needs the pod's chips is refused where the program asks for it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from offload_fixer.jax_compat.pod import PodExecution, is_pod_failure, pod_view


def test_jax_answers_as_process_0_of_the_pod(tpu_pod):
    cpu = jax.devices()
    with pod_view(tpu_pod):
        jax.distributed.initialize()  # no coordinator to reach: process 0 goes on
        assert jax.distributed.is_initialized()
        assert (jax.device_count(), jax.process_count(), jax.process_index()) == (16, 4, 0)
        assert jax.local_devices() == [d for d in jax.devices() if d.process_index == 0]
        assert jax.local_device_count() == 4 and jax.process_indices() == [0, 1, 2, 3]
        assert jax.default_backend() == "tpu" and jax.devices()[0].platform == "tpu"
        assert jax.devices("cpu") == cpu
        # eager work still runs here: keys, abstract shapes, the program's own numbers
        assert jnp.ones(3).devices() == {cpu[0]}
        mesh = jax.make_mesh((4, 4), ("fsdp", "tensor"))
        assert set(mesh.devices.flat) == set(jax.devices())
    assert jax.devices() == cpu and jax.default_backend() == "cpu"
    assert not jax.distributed.is_initialized()


def test_what_needs_the_pods_chips_is_refused_where_it_is_asked(tpu_pod):
    with pod_view(tpu_pod):
        mesh = jax.make_mesh((4, 4), ("fsdp", "tensor"))
        sharded = NamedSharding(mesh, P("fsdp"))
        with pytest.raises(PodExecution, match=r"jax\.device_put needs the v5e:4x4 pod.s chips"):
            jax.device_put(np.ones(16, np.float32), sharded)
        with pytest.raises(PodExecution, match="make_array_from_process_local_data"):
            jax.make_array_from_process_local_data(sharded, np.ones(4, np.float32))
        double = jax.jit(lambda x: x * 2, in_shardings=sharded)
        on_pod = double.lower(jax.ShapeDtypeStruct((16,), jnp.float32))
        assert tpu_pod.runs_on_pod(on_pod)
        assert not tpu_pod.runs_on_pod(jax.jit(lambda x: x * 2).lower(np.ones(3)))
        # an array on this machine's CPU is still the program's to move and compute with
        assert float(jax.device_put(np.ones(3), jax.devices("cpu")[0]).sum()) == 3.0


def test_a_compile_only_clients_own_refusal_is_told_apart(tpu_pod):
    """What reaches libtpu's compile-only client past the wrapped functions (a transfer JAX
    makes on its own) fails with its own words, which the runner recognises."""
    from jax._src import api

    sharded = NamedSharding(jax.sharding.Mesh(np.array(tpu_pod.devices[:4]), ("x",)), P("x"))
    with pytest.raises(Exception) as raised:
        api.device_put(np.ones(4, np.float32), sharded)  # JAX's own device_put: not wrapped
    assert is_pod_failure(raised.value), raised.value
