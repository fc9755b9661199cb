"""Params streamed from host on an 8-device mesh, used without a move to device."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


BATCH = NamedSharding(MESH, P("data"), memory_kind="device")


def step(w, x):
    loss, g = jax.value_and_grad(lambda w: jnp.mean((x @ w) ** 2))(w)
    return w - 0.1 * g, loss


run = jax.jit(step, in_shardings=(HOST, BATCH))


if __name__ == "__main__":
    print(run(np.ones((8, 8), np.float32), np.ones((16, 8), np.float32))[1])
