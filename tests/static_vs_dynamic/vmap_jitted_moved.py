"""jax.jit(jax.vmap(f)) where f moves the host weight to device first: clean."""

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


def f(w, x):
    w = jax.device_put(w, DEVICE)
    return jnp.dot(w, x)


run = jax.jit(jax.vmap(f, in_axes=(None, 0)), in_shardings=(HOST, DEVICE))

if __name__ == "__main__":
    print(run(np.ones((8, 8), np.float32), np.ones((4, 8), np.float32)).shape)
