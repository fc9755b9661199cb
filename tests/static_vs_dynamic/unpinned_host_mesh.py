"""A computed value moved to unpinned_host over a jax.sharding.Mesh (Auto axes) and returned:
libtpu refuses it (error 1200)."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

MESH = Mesh(np.array(jax.devices()[:1]), ("batch",))
SNAPSHOT = NamedSharding(MESH, P(), memory_kind="unpinned_host")


def snapshot(x):
    y = x * 2
    return y + 1, jax.device_put(y, SNAPSHOT)


step = jax.jit(snapshot)


if __name__ == "__main__":
    print(step(jnp.ones((8, 4))))
