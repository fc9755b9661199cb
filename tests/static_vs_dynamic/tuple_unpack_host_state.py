"""State unpacked from a tuple argument whose second half is streamed from host."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def step(state, g):
    params, moment = state
    moment = moment * 0.9 + g
    return params - moment, moment


run = jax.jit(step, in_shardings=((DEVICE, HOST), DEVICE))


if __name__ == "__main__":
    print(run((np.ones((8,), np.float32), np.zeros((8,), np.float32)), np.ones((8,), np.float32))[0])
