"""A dict comprehension moves each host layer to device before use: clean."""

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


def forward(params, x):
    params = {k: jax.device_put(v, DEVICE) for k, v in params.items()}
    for k in sorted(params):
        x = jnp.tanh(x @ params[k])
    return x


run = jax.jit(forward, in_shardings=({"a": HOST, "b": HOST}, DEVICE))

if __name__ == "__main__":
    params = {"a": np.ones((8, 8), np.float32), "b": np.ones((8, 8), np.float32)}
    print(run(params, np.ones((2, 8), np.float32)).shape)
