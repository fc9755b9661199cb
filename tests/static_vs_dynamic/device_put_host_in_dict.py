"""Values moved to host and returned in a dict: clean from JAX 0.4.29."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def stash(x, y):
    return {"x": jax.device_put(x, HOST), "y": y * 2}


run = jax.jit(stash)


if __name__ == "__main__":
    print(run(jnp.ones(8), jnp.ones(8))["y"])
