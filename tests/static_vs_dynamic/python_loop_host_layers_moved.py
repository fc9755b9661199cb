"""The unrolled layer loop with each layer moved to device: clean."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


def forward(layers, x):
    for w in layers:
        x = jax.nn.relu(x @ jax.device_put(w, DEVICE))
    return x


run = jax.jit(forward, in_shardings=(HOST, DEVICE))


if __name__ == "__main__":
    layers = [np.ones((8, 8), np.float32) * 0.1 for _ in range(3)]
    print(run(layers, np.ones((2, 8), np.float32)).shape)
