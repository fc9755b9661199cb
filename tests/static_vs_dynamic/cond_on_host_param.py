"""lax.cond whose branches both compute with a host-streamed parameter."""

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


def branch(flag, w, x):
    return lax.cond(flag, lambda w, x: w * x, lambda w, x: w + x, w, x)


run = jax.jit(branch, in_shardings=(DEVICE, HOST, DEVICE))


if __name__ == "__main__":
    print(run(True, np.ones((8,), np.float32), np.ones((8,), np.float32)))
