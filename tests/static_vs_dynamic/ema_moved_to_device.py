"""The moving average moved to device, updated, and put back to host: clean."""

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


def ema(avg, params):
    avg = jax.device_put(avg, DEVICE)
    avg = jax.tree.map(lambda a, p: 0.99 * a + 0.01 * p, avg, params)
    return jax.device_put(avg, HOST)


run = jax.jit(ema, in_shardings=(HOST, DEVICE), out_shardings=HOST)


if __name__ == "__main__":
    params = {"w": np.ones((8, 8), np.float32), "b": np.zeros((8,), np.float32)}
    print(jax.tree.map(jnp.shape, run(params, params)))
