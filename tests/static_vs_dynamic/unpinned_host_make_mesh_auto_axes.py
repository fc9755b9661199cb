"""A computed value moved to unpinned_host over a jax.make_mesh mesh whose axes are Auto and
returned: the output is declared unpinned_host, and libtpu refuses it (error 1200)."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((1,), ("batch",), axis_types=(AxisType.Auto,))
SNAPSHOT = NamedSharding(MESH, P(), memory_kind="unpinned_host")


def snapshot(x):
    y = x * 2
    return y + 1, jax.device_put(y, SNAPSHOT)


step = jax.jit(snapshot)


if __name__ == "__main__":
    print(step(jnp.ones((8, 4))))
