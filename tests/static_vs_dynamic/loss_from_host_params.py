"""A loss computed from host-streamed params and returned."""

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


def loss_fn(params, x):
    return jnp.mean((x @ params["w"] + params["b"]) ** 2)


run = jax.jit(loss_fn, in_shardings=(HOST, DEVICE))


if __name__ == "__main__":
    params = {"w": np.ones((8, 8), np.float32), "b": np.zeros((8,), np.float32)}
    print(run(params, np.ones((4, 8), np.float32)))
