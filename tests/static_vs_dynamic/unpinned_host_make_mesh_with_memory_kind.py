"""A computed value moved to a jax.make_mesh sharding turned unpinned_host (with_memory_kind)
and returned: the mesh's axes are Explicit (JAX 0.9 on), so libtpu compiles it."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

SNAPSHOT = NamedSharding(jax.make_mesh((1,), ("batch",)), P()).with_memory_kind("unpinned_host")


def snapshot(x):
    y = x * 2
    return y + 1, jax.device_put(y, SNAPSHOT)


step = jax.jit(snapshot)


if __name__ == "__main__":
    print(step(jnp.ones((8, 4))))
