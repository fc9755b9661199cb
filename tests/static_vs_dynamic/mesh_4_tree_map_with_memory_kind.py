"""A 4-device mesh; the state's sharding tree is mapped to pinned_host with tree.map."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((4,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def state_shardings():
    return {"w": NamedSharding(MESH, P("data")), "b": NamedSharding(MESH, P())}


HOST_TREE = jax.tree.map(lambda s: s.with_memory_kind("pinned_host"), state_shardings())


def step(state, g):
    return jax.tree.map(lambda p: p - 0.1 * g.mean(), state)


run = jax.jit(step, in_shardings=(HOST_TREE, DEVICE))


if __name__ == "__main__":
    state = {"w": np.ones((8,), np.float32), "b": np.zeros((8,), np.float32)}
    print(jax.tree.map(jnp.shape, run(state, np.ones((8,), np.float32))))
