"""scan over a dict of stacked host layers as xs."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def forward(stack, x):
    def body(h, layer):
        return jnp.tanh(h @ layer["w"] + layer["b"]), None

    h, _ = lax.scan(body, x, stack)
    return h


run = jax.jit(forward, in_shardings=({"w": HOST, "b": HOST}, DEVICE))

if __name__ == "__main__":
    stack = {"w": np.ones((3, 8, 8), np.float32) * 0.1, "b": np.zeros((3, 8), np.float32)}
    print(run(stack, np.ones((2, 8), np.float32)).shape)
