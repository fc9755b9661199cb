"""A host-streamed parameter cast to bfloat16 and returned."""

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


def cast(w):
    return w.astype(jnp.bfloat16)


run = jax.jit(cast, in_shardings=HOST)


if __name__ == "__main__":
    print(run(np.ones((8,), np.float32)).dtype)
