"""A Trainer class whose jitted step closes over a host moment via a method helper."""

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


class Trainer:
    def __init__(self, lr):
        self.lr = lr

    def update(self, params, mom, grads):
        mom = jax.tree.map(lambda m, g: 0.9 * m + g, mom, grads)
        params = jax.tree.map(lambda p, m: p - self.lr * m, params, mom)
        return params, mom


TRAINER = Trainer(0.1)


def step(params, mom, x):
    grads = jax.grad(lambda p: jnp.sum((x @ p["w"]) ** 2))(params)
    return TRAINER.update(params, mom, grads)


run = jax.jit(step, in_shardings=(DEVICE, HOST, DEVICE))

if __name__ == "__main__":
    p = {"w": np.ones((8, 8), np.float32)}
    print(jax.tree.map(jnp.shape, run(p, p, np.ones((2, 8), np.float32))))
