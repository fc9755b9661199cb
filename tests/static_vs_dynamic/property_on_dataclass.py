"""A registered dataclass with a property combining fields; one field on host."""

import dataclasses
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Pair:
    a: jax.Array
    b: jax.Array

    @property
    def total(self):
        return self.a + self.b


def f(p):
    return p.total


run = jax.jit(f, in_shardings=(Pair(HOST, DEVICE),))

if __name__ == "__main__":
    print(run(Pair(np.ones((8,), np.float32), np.ones((8,), np.float32))))
