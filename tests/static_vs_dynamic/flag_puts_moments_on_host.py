"""Moments on host only when a configuration flag says so (it does here): the update then
runs on the host CPU."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")

OFFLOAD_MOMENTS = os.environ.get("OFFLOAD_MOMENTS", "1") == "1"
MOMENTS = HOST if OFFLOAD_MOMENTS else DEVICE


def momentum(mu, grads):
    return jax.tree.map(lambda m, g: 0.9 * m + g, mu, grads)


run = jax.jit(momentum, in_shardings=(MOMENTS, DEVICE), out_shardings=MOMENTS)


if __name__ == "__main__":
    grads = {"w": np.ones((8, 8), np.float32)}
    print(run(grads, grads)["w"].shape)
