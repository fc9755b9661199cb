"""The layout a partitioned module declares for its arguments and results, as a finding names it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from offload_fixer.ir.module import load
from offload_fixer.jax_compat.pod import pod_view


def test_each_dimension_names_its_mesh_axes_and_one_devices_piece(tpu_pod):
    with pod_view(tpu_pod):
        mesh = Mesh(np.array(jax.devices()).reshape(4, 4), ("fsdp", "tensor"))
        weights = NamedSharding(mesh, P(None, "fsdp", "tensor"), memory_kind="pinned_host")
        batch = NamedSharding(mesh, P(("fsdp", "tensor")))
        step = jax.jit(
            lambda w, x: (jnp.sum(w), x * 2),
            in_shardings=(weights, batch),
            out_shardings=(NamedSharding(mesh, P()), batch),
        )
        abstract = (jax.ShapeDtypeStruct((2, 64, 32), jnp.float32), jax.ShapeDtypeStruct((32, 8), jnp.bfloat16))
        view = load(step.lower(*abstract))
    assert view.partitions == 16
    w, x = (arg.sharding for arg in view.args)
    assert w is not None and x is not None
    assert (w.dtype, w.shape, w.tiles, w.shard) == ("f32", (2, 64, 32), (1, 4, 4), (2, 16, 8))
    assert (x.dtype, x.tiles, x.shard) == ("bf16", (16, 1), (2, 8))
    total = view.results[0].sharding
    if w.axes:  # Shardy (JAX 0.7 on) names the mesh, and declares a replicated result
        assert w.mesh == (("fsdp", 4), ("tensor", 4))
        assert w.layout() == "f32[2,64,32] as P(None, 'fsdp', 'tensor'): f32[2,16,8] per device"
        assert x.layout() == "bf16[32,8] as P(('fsdp', 'tensor'), None): bf16[2,8] per device"
        assert total is not None and total.layout() == "f32[] replicated"
    else:  # GSPMD (JAX 0.6.2) gives the pieces only, and leaves a replicated result unsaid
        assert w.layout() == "f32[2,64,32] split 1x4x4: f32[2,16,8] per device"
        assert total is None


def test_a_module_on_one_device_declares_no_layout():
    view = load(jax.jit(lambda x: x * 2).lower(jnp.ones((4, 4))))
    assert view.partitions == 1
    assert all(value.sharding is None for value in (*view.args, *view.results))
