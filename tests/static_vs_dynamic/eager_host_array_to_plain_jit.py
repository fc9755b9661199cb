"""A host-resident array handed to a plain ``@jax.jit`` function: committed to pinned_host, it is
traced in host memory, and the jit computes on it there."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp

HOST = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


@jax.jit
def normalise(x):
    return x / jnp.linalg.norm(x)


cache = jax.device_put(jnp.ones(32), HOST)
print(normalise(cache).sum())
