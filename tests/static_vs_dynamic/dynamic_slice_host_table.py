"""An embedding table streamed from host; rows taken with dynamic_slice are scaled on host."""

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


def lookup(table, start):
    rows = lax.dynamic_slice(table, (start, 0), (4, 8))
    return rows * 2.0


run = jax.jit(lookup, in_shardings=(HOST, DEVICE))


if __name__ == "__main__":
    print(run(np.ones((16, 8), np.float32), 3).shape)
