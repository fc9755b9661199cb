"""A host buffer updated, returned to a declared host output and moved to device for a
reading: the declared output is a copy of its own, so nothing runs on the host."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def update_and_read(buffer, row):
    buffer = buffer.at[0].set(row)
    return buffer, jax.device_put(buffer, DEVICE) * 2


run = jax.jit(update_and_read, in_shardings=(HOST, DEVICE), out_shardings=(HOST, DEVICE))


if __name__ == "__main__":
    print(run(np.zeros((4, 8), np.float32), np.ones((8,), np.float32))[1].shape)
