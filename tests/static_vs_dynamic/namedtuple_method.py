"""A NamedTuple state with a method that updates a host field."""

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


class State(NamedTuple):
    w: jax.Array
    ema: jax.Array

    def advance(self, g):
        w = self.w - 0.1 * g
        return State(w, 0.9 * self.ema + 0.1 * w)


def step(state, g):
    return state.advance(g)


run = jax.jit(step, in_shardings=(State(DEVICE, HOST), DEVICE))

if __name__ == "__main__":
    print(run(State(np.ones((8,), np.float32), np.zeros((8,), np.float32)), np.ones((8,), np.float32)).ema)
