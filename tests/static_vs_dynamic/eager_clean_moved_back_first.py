"""The eager code moves its host stash back to device before it computes: no finding."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp

DEVICE = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")

stash = jax.device_put(jnp.ones((16, 8)), HOST)
restored = jax.device_put(stash, DEVICE)
print(float((restored * 2).sum()), restored[::2].shape, (restored + jnp.ones((16, 8))).shape)
