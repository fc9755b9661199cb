"""A block rematerialised with an offload policy (residuals to pinned_host) under grad: clean."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[],
    names_which_can_be_offloaded=["hidden"],
    offload_src="device",
    offload_dst="pinned_host",
)


def block(w, x):
    h = checkpoint_name(jnp.tanh(x @ w), "hidden")
    return jnp.sum(h**2)


@jax.jit
def grads(w, x):
    return jax.grad(jax.checkpoint(block, policy=POLICY))(w, x)


if __name__ == "__main__":
    print(grads(jnp.ones((8, 8)), jnp.ones((2, 8))).shape)
