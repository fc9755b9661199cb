"""A scan whose carry is initialised from a host-streamed parameter."""

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


def rollout(h0, xs):
    def cell(h, x):
        h = jnp.tanh(h + x)
        return h, h.sum()

    return lax.scan(cell, h0, xs)


run = jax.jit(rollout, in_shardings=(HOST, DEVICE))


if __name__ == "__main__":
    print(run(np.zeros((8,), np.float32), np.ones((5, 8), np.float32))[1])
