"""A global norm over jax.tree.leaves of host grads."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def norm(params):
    return jnp.sqrt(sum(jnp.sum(x**2) for x in jax.tree.leaves(params)))


run = jax.jit(norm, in_shardings=({"w": HOST, "b": HOST},))

if __name__ == "__main__":
    print(run({"w": np.ones((8, 8), np.float32), "b": np.ones((8,), np.float32)}))
