"""A replay buffer in pinned_host; its mean reward is computed eagerly for logging. JAX declares
``jnp.mean``'s eager result device memory: error 1200 on TPU, and host compute."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp

HOST = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")

rewards = jax.device_put(jnp.linspace(0.0, 1.0, 256), HOST)
mean_reward = jnp.mean(rewards)
print(float(mean_reward))
