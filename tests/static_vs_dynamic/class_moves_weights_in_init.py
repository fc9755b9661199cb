"""A model class that moves its host weights to device in a method before use: clean."""

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


class Model:
    def __init__(self, scale):
        self.scale = scale

    def prepare(self, params):
        return jax.device_put(params, DEVICE)

    def __call__(self, params, x):
        params = self.prepare(params)
        return jnp.tanh(x @ params["w"]) * self.scale


MODEL = Model(2.0)
run = jax.jit(lambda params, x: MODEL(params, x), in_shardings=({"w": HOST}, DEVICE))

if __name__ == "__main__":
    print(run({"w": np.ones((8, 8), np.float32)}, np.ones((2, 8), np.float32)).shape)
