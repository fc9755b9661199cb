"""Adam with moments in pinned_host, declared host in out_shardings; the loss is returned."""

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


def loss_fn(params, x):
    return jnp.mean((x @ params["w"]) ** 2)


def step(params, mu, nu, x):
    loss, grads = jax.value_and_grad(loss_fn)(params, x)
    mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, mu, grads)
    nu = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, nu, grads)
    params = jax.tree.map(lambda p, m, v: p - 0.01 * m / (jnp.sqrt(v) + 1e-8), params, mu, nu)
    return params, mu, nu, loss


run = jax.jit(
    step,
    in_shardings=(DEVICE, HOST, HOST, DEVICE),
    out_shardings=(DEVICE, HOST, HOST, DEVICE),
)


if __name__ == "__main__":
    params = {"w": np.ones((8, 8), np.float32)}
    zeros = {"w": np.zeros((8, 8), np.float32)}
    print(run(params, zeros, zeros, np.ones((4, 8), np.float32))[3])
