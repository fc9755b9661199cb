"""A helper object stores a device copy on self in one method and reads it in another: clean."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


class Stash:
    def __init__(self):
        self.weights = None

    def load(self, w):
        self.weights = jax.device_put(w, DEVICE)

    def apply(self, x):
        return x @ self.weights


def forward(w, x):
    stash = Stash()
    stash.load(w)
    return stash.apply(x)


run = jax.jit(forward, in_shardings=(HOST, DEVICE))

if __name__ == "__main__":
    print(run(np.ones((8, 8), np.float32), np.ones((2, 8), np.float32)).shape)
