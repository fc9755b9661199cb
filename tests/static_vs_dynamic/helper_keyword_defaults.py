"""A helper called with keywords and a default scale, on a device copy of host weights: clean."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def scaled(w, x, *, scale=0.5, bias=None):
    y = scale * (x @ w)
    return y if bias is None else y + bias


def step(w, x):
    w = jax.device_put(w, DEVICE)
    return scaled(w, x, bias=1.0)


run_step = jax.jit(step, in_shardings=(HOST, DEVICE))


if __name__ == "__main__":
    print(run_step(np.ones((8, 8), np.float32), np.ones((4, 8), np.float32)).shape)
