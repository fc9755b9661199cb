"""stop_gradient on a host-streamed target, used in a loss that is returned."""

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


def loss(target, pred):
    return jnp.mean((pred - lax.stop_gradient(target)) ** 2)


run = jax.jit(loss, in_shardings=(HOST, DEVICE))


if __name__ == "__main__":
    print(run(np.ones((8,), np.float32), np.zeros((8,), np.float32)))
