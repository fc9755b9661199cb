"""A dataclass with a replace method (flax.struct style) built by hand; host moment."""

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
@dataclasses.dataclass(frozen=True)
class State:
    params: jax.Array
    moment: jax.Array

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


def step(state, grad):
    moment = 0.9 * state.moment + grad
    return state.replace(params=state.params - 0.1 * moment, moment=moment)


run = jax.jit(step, in_shardings=(State(DEVICE, HOST), DEVICE))

if __name__ == "__main__":
    s = State(np.ones((8,), np.float32), np.zeros((8,), np.float32))
    print(run(s, np.ones((8,), np.float32)).params)
