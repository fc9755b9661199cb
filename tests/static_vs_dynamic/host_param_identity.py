"""A host-streamed parameter returned as is to a device output."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def keep(w, x):
    return w, x * 2


run = jax.jit(keep, in_shardings=(HOST, DEVICE))


if __name__ == "__main__":
    print(run(np.ones((8,), np.float32), np.ones((8,), np.float32))[1])
