"""A decorator factory whose inner `wrap` jits with `**OPTIONS, **extra` (the moment streamed
from host); the step moves the moment to device before updating it: clean."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")
OPTIONS = {"in_shardings": (DEVICE, HOST)}


def compiled(**extra):
    def wrap(fn):
        return jax.jit(fn, **OPTIONS, **extra)

    return wrap


@compiled(donate_argnums=(0,))
def train(params, nu):
    grads = jax.tree.map(jnp.ones_like, params)
    nu = jax.device_put(nu, DEVICE)
    nu = jax.tree.map(lambda v, g: 0.9 * v + g, nu, grads)
    return jax.tree.map(lambda p, v: p - 0.01 * v, params, nu)


if __name__ == "__main__":
    params = {"w": np.ones((8, 8), np.float32), "b": np.zeros((8,), np.float32)}
    nu = jax.tree.map(np.zeros_like, params)
    print(jax.tree.map(jnp.shape, train(params, nu)))
