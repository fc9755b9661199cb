"""A Python loop over range(len(layers)) indexing host layers."""

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


def forward(layers, x):
    for i in range(len(layers)):
        x = jnp.tanh(x @ layers[i])
    return x


run = jax.jit(forward, in_shardings=(HOST, DEVICE))

if __name__ == "__main__":
    print(run([np.ones((8, 8), np.float32)] * 3, np.ones((2, 8), np.float32)).shape)
