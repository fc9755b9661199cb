"""A loss helper returning a dict of metrics computed from host-streamed weights."""

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


def metrics(params, x):
    y = x @ params["w"] + params["b"]
    return {"loss": jnp.mean(y**2), "norm": jnp.sum(params["w"] ** 2)}


@jax.jit
def evaluate(params, x):
    return metrics(params, x)


evaluate_streamed = jax.jit(evaluate, in_shardings=(HOST, DEVICE))


if __name__ == "__main__":
    params = {"w": np.ones((8, 8), np.float32), "b": np.zeros((8,), np.float32)}
    print(evaluate_streamed(params, np.ones((4, 8), np.float32)))
