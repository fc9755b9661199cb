"""A dict comprehension scales each host layer (host compute), returned."""

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


def scale(params):
    return {k: v * 0.5 for k, v in params.items()}


run = jax.jit(scale, in_shardings=({"a": HOST, "b": HOST},))

if __name__ == "__main__":
    params = {"a": np.ones((8, 8), np.float32), "b": np.ones((8, 8), np.float32)}
    print(jax.tree.map(jnp.shape, run(params)))
