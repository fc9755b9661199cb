"""The 2x4-mesh update with the output declared pinned_host: clean."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((2, 4), ("data", "model"))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


SHARDED = NamedSharding(MESH, P(None, "model"), memory_kind="device")
SHARDED_HOST = SHARDED.with_memory_kind("pinned_host")


def step(w, g):
    return jax.device_put(w, SHARDED) - 0.1 * g


run = jax.jit(step, in_shardings=(SHARDED_HOST, SHARDED), out_shardings=SHARDED_HOST)


if __name__ == "__main__":
    print(run(np.ones((8, 8), np.float32), np.ones((8, 8), np.float32)).shape)
