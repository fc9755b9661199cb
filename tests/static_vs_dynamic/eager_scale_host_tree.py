"""A rollout buffer kept in pinned_host and rescaled eagerly, leaf by leaf."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp

HOST = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


def stash(rollouts):
    return jax.device_put(rollouts, HOST)


def rescale(buffer, factor):
    return jax.tree.map(lambda leaf: leaf * factor, buffer)


buffer = stash({"obs": jnp.ones((16, 8)), "reward": jnp.ones(16)})
buffer = rescale(buffer, 0.5)  # eager multiplies, each on the host CPU
print(jax.tree.map(lambda leaf: leaf.sharding.memory_kind, buffer))
