"""Adam-like state as a NamedTuple updated with _replace; mu on host."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


class AdamState(NamedTuple):
    count: jax.Array
    mu: dict
    nu: dict


def update(params, state, grads):
    mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, state.mu, grads)
    nu = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, state.nu, grads)
    params = jax.tree.map(lambda p, m, v: p - 1e-3 * m / (jnp.sqrt(v) + 1e-8), params, mu, nu)
    return params, state._replace(count=state.count + 1, mu=mu, nu=nu)


state_shardings = AdamState(DEVICE, HOST, DEVICE)
run = jax.jit(update, in_shardings=(DEVICE, state_shardings, DEVICE), out_shardings=(DEVICE, state_shardings))

if __name__ == "__main__":
    params = {"w": np.ones((8, 8), np.float32)}
    zeros = {"w": np.zeros((8, 8), np.float32)}
    state = AdamState(np.zeros((), np.int32), zeros, zeros)
    print(jax.tree.map(jnp.shape, run(params, state, params)))
