"""jnp.where on a device copy of the host value: clean."""

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


def gate(h, x):
    return jnp.where(x > 0, jax.device_put(h, DEVICE), x)


run = jax.jit(gate, in_shardings=(HOST, DEVICE))


if __name__ == "__main__":
    print(run(np.ones((8,), np.float32), np.ones((8,), np.float32) - 0.5))
