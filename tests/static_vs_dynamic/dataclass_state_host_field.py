"""Training state as a registered dataclass whose moment field is streamed from host."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import dataclasses

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class State:
    params: jax.Array
    moment: jax.Array


def update(state, grad):
    moment = 0.9 * state.moment + grad
    return State(params=state.params - 0.1 * moment, moment=moment)


run = jax.jit(update, in_shardings=(State(DEVICE, HOST), DEVICE))


if __name__ == "__main__":
    state = State(np.ones((8,), np.float32), np.zeros((8,), np.float32))
    print(run(state, np.ones((8,), np.float32)).params)
