"""A computed value moved to unpinned_host over jax.make_mesh's mesh and returned: its axes are
Explicit (JAX 0.9 on), so JAX moves the output back to device memory and libtpu compiles it."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

SNAPSHOT = NamedSharding(jax.make_mesh((1,), ("batch",)), P(), memory_kind="unpinned_host")


def snapshot(x):
    y = x * 2
    return y + 1, jax.device_put(y, SNAPSHOT)


step = jax.jit(snapshot)


if __name__ == "__main__":
    print(step(jnp.ones((8, 4))))
