"""A while_loop whose carry starts from a host-streamed state and is updated."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def iterate(state):
    def cond(carry):
        return carry[0] < 3

    def body(carry):
        i, s = carry
        return i + 1, s * 0.5

    return lax.while_loop(cond, body, (0, state))[1]


run = jax.jit(iterate, in_shardings=HOST)


if __name__ == "__main__":
    print(run(np.ones((8,), np.float32)))
