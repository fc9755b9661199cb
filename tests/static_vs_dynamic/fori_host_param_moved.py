"""The fori_loop with the bias moved to device before the loop: clean."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def accumulate(bias, x):
    bias = jax.device_put(bias, DEVICE)
    return lax.fori_loop(0, 4, lambda i, acc: acc + bias, x)


run = jax.jit(accumulate, in_shardings=(HOST, DEVICE))


if __name__ == "__main__":
    print(run(np.ones((8,), np.float32), np.zeros((8,), np.float32)))
