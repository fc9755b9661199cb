"""value_and_grad with has_aux; the aux metric is computed from a host param."""

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


def loss(params, x):
    y = x @ params["w"]
    return jnp.sum(y**2), {"norm": jnp.sum(params["w"] ** 2)}


def step(params, x):
    (value, aux), _ = jax.value_and_grad(loss, has_aux=True)(params, x)
    return value, aux


run = jax.jit(step, in_shardings=({"w": HOST}, DEVICE))

if __name__ == "__main__":
    print(run({"w": np.ones((8, 8), np.float32)}, np.ones((2, 8), np.float32)))
