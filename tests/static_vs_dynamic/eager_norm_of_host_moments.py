"""Adam moments parked in pinned_host between steps; their norm is logged eagerly, on the host."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp

ON_HOST = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


@jax.jit
def update(params, grads, mu):
    mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, mu, grads)
    params = jax.tree.map(lambda p, m: p - 0.01 * m, params, mu)
    return params, mu


params = {"w": jnp.ones((64, 64)), "b": jnp.zeros(64)}
mu = jax.tree.map(jnp.zeros_like, params)
grads = jax.tree.map(jnp.ones_like, params)
params, mu = update(params, grads, mu)
mu = jax.device_put(mu, ON_HOST)  # parked on the host until the next step
moment_norm = jnp.sqrt(jnp.sum(mu["w"] ** 2))  # eager: computed on the host CPU
print(float(moment_norm))
