"""Python loop over zip of host weights and device biases."""

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


def mlp(ws, bs, x):
    for w, b in zip(ws, bs):
        x = jnp.tanh(x @ w + b)
    return x


run = jax.jit(mlp, in_shardings=(HOST, DEVICE, DEVICE))

if __name__ == "__main__":
    ws = [np.ones((8, 8), np.float32) * 0.1] * 3
    bs = [np.zeros((8,), np.float32)] * 3
    print(run(ws, bs, np.ones((2, 8), np.float32)).shape)
