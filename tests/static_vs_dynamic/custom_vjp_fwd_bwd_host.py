"""custom_vjp with fwd/bwd; the weight is on host and used in fwd."""

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


@jax.custom_vjp
def matmul(x, w):
    return x @ w


def matmul_fwd(x, w):
    return x @ w, (x, w)


def matmul_bwd(res, g):
    x, w = res
    return g @ w.T, x.T @ g


matmul.defvjp(matmul_fwd, matmul_bwd)


def loss(w, x):
    return jnp.sum(matmul(x, w) ** 2)


run = jax.jit(jax.grad(loss), in_shardings=(HOST, DEVICE))

if __name__ == "__main__":
    print(run(np.ones((8, 8), np.float32), np.ones((2, 8), np.float32)).shape)
