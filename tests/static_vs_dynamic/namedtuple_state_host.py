"""Optimizer state as a NamedTuple whose velocity is streamed from host."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


class Momentum(NamedTuple):
    velocity: jax.Array
    count: jax.Array


def update(state, grad):
    velocity = 0.9 * state.velocity + grad
    return Momentum(velocity, state.count + 1)


run = jax.jit(update, in_shardings=(Momentum(HOST, DEVICE), DEVICE))


if __name__ == "__main__":
    state = Momentum(np.zeros((8,), np.float32), np.zeros((), np.int32))
    print(run(state, np.ones((8,), np.float32)).count)
