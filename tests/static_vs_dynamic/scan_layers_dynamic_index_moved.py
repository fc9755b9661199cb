"""The layer-streaming scan done right: each layer taken with dynamic_index_in_dim is moved
to device before use (the DMA XLA streams)."""

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
    def body(h, i):
        w = lax.dynamic_index_in_dim(stack, i, keepdims=False)
        w = jax.device_put(w, DEVICE)
        return jnp.tanh(h @ w), None

    h, _ = lax.scan(body, x, jnp.arange(stack.shape[0]))
    return h


run = jax.jit(forward, in_shardings=(HOST, DEVICE))


if __name__ == "__main__":
    print(run(np.ones((4, 8, 8), np.float32) * 0.1, np.ones((2, 8), np.float32)).shape)
