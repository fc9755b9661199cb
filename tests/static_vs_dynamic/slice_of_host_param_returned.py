"""A static slice of a host-streamed parameter returned (XLA compiles it as a DMA)."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def first_rows(h):
    return h[0:4]


run = jax.jit(first_rows, in_shardings=HOST)


if __name__ == "__main__":
    print(run(np.ones((16, 8), np.float32)).shape)
