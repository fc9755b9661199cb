"""Rows of a host buffer written in a Python loop: the counter is a constant to JAX, so each
write is a dynamic-update-slice (a memory transfer), not host compute."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def fill(buffer, row):
    for i in range(3):
        buffer = buffer.at[i].set(row)
    return buffer


run = jax.jit(fill, in_shardings=(HOST, DEVICE), out_shardings=HOST)


if __name__ == "__main__":
    print(run(np.zeros((4, 8), np.float32), np.ones((8,), np.float32)).shape)
