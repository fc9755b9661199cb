"""Momentum kept in pinned_host, updated eagerly with gradients in device memory: from JAX 0.7.1
JAX refuses the add (operands in different memory spaces)."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp

HOST = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")

momentum = jax.device_put(jnp.zeros((128,)), HOST)
grads = jnp.ones((128,))
momentum = 0.9 * momentum + grads
print(momentum.sharding.memory_kind)
