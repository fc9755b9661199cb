"""Momentum SGD with the velocity streamed from host and updated on host; params returned."""

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


def step(params, velocity, grads):
    velocity = jax.tree.map(lambda v, g: 0.9 * v + g, velocity, grads)
    params = jax.tree.map(lambda p, v: p - 0.01 * v, params, velocity)
    return params, velocity


run = jax.jit(step, in_shardings=(DEVICE, HOST, DEVICE), out_shardings=(DEVICE, HOST))


if __name__ == "__main__":
    params = {"w": np.ones((8, 8), np.float32), "b": np.zeros((8,), np.float32)}
    zeros = jax.tree.map(np.zeros_like, params)
    print(jax.tree.map(jnp.shape, run(params, zeros, zeros)[0]))
