"""Gradient accumulation into a donated host buffer: each micro-step adds its gradient to the
accumulator kept on host, and the mean gradient norm (device) is read from the accumulator."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[0]",)

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(HOST, DEVICE, DEVICE), out_shardings=(HOST, None), donate_argnums=0)
def accumulate(accumulator, w, x):
    grad = jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
    accumulator = accumulator + grad
    return accumulator, jnp.linalg.norm(accumulator)


def example():
    accumulator = np.zeros((8, 4), np.float32)
    w = np.linspace(0, 1, 32, dtype=np.float32).reshape(8, 4)
    x = np.ones((3, 8), np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (accumulator, w, x))
    compiled = accumulate.lower(*shapes).compile()
    return compiled(jax.device_put(accumulator, HOST), jax.device_put(w, DEVICE), jax.device_put(x, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
