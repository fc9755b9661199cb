"""fori_loop with a lambda body that closes over a host weight."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def power(w, x):
    return lax.fori_loop(0, 3, lambda i, h: jnp.tanh(h @ w), x)


run = jax.jit(power, in_shardings=(HOST, DEVICE))

if __name__ == "__main__":
    print(run(np.ones((8, 8), np.float32) * 0.1, np.ones((2, 8), np.float32)).shape)
