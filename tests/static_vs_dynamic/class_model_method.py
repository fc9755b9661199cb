"""A model class whose __call__ is traced; the weights dict is on host."""

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


class MLP:
    def __init__(self, depth):
        self.depth = depth

    def __call__(self, params, x):
        for i in range(self.depth):
            x = jnp.tanh(x @ params[f"w{i}"])
        return x


MODEL = MLP(2)
run = jax.jit(lambda params, x: MODEL(params, x), in_shardings=(HOST, DEVICE))

if __name__ == "__main__":
    params = {"w0": np.ones((8, 8), np.float32), "w1": np.ones((8, 8), np.float32)}
    print(run(params, np.ones((2, 8), np.float32)).shape)
