"""The state's shardings built by a function from a flag, host moments when offloading."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def shardings(offload):
    moments = HOST if offload else DEVICE
    return {"params": DEVICE, "mu": moments}


def update(state, g):
    mu = 0.9 * state["mu"] + g
    return {"params": state["params"] - 0.1 * mu, "mu": mu}


run = jax.jit(update, in_shardings=(shardings(True), DEVICE))


if __name__ == "__main__":
    state = {"params": np.ones((8,), np.float32), "mu": np.zeros((8,), np.float32)}
    print(run(state, np.ones((8,), np.float32))["params"])
