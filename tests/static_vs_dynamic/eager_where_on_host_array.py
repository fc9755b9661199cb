"""A host-resident advantage buffer clipped eagerly with ``jnp.where``: the 0.0 becomes a device
array of the buffer's shape, which JAX (from 0.7.1) refuses to mix with host memory."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp

HOST = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


def clip_negative(advantages):
    return jnp.where(advantages > 0, advantages, 0.0)


advantages = jax.device_put(jnp.linspace(-1.0, 1.0, 64), HOST)
print(clip_negative(advantages).sum())
