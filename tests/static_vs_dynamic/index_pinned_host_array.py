"""a[i] of an array moved to pinned_host inside the jit, returned."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def pick(a, i):
    stash = jax.device_put(a, HOST)
    return stash[i]


run = jax.jit(pick)


if __name__ == "__main__":
    print(run(jnp.ones((4, 8)), 2).shape)
