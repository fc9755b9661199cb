"""A value moved to host and reduced there; the sum is returned."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def total(x):
    return jnp.sum(jax.device_put(x, HOST))


run = jax.jit(total)


if __name__ == "__main__":
    print(run(jnp.ones(8)))
