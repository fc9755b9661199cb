"""vmap of a per-example function over a host-streamed batch."""

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


def per_example(w, x):
    return jnp.dot(w, x)


def batched(w, xs):
    return jax.vmap(per_example, in_axes=(None, 0))(w, xs)


run = jax.jit(batched, in_shardings=(DEVICE, HOST))


if __name__ == "__main__":
    print(run(np.ones((8,), np.float32), np.ones((4, 8), np.float32)).shape)
