"""Adam written with a tuple state ``(params, mu, nu)``: the jit's ``in_shardings`` is a tuple
with the moments' entries on host; the returned params come out of host moments."""

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[1]", "[2]")

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(DEVICE, HOST, HOST, DEVICE), out_shardings=(None, HOST, HOST))
def adam(params, mu, nu, grads):
    mu = 0.9 * mu + 0.1 * grads
    nu = 0.99 * nu + 0.01 * grads**2
    return params - 0.01 * mu / (nu**0.5 + 1e-8), mu, nu


def example():
    params, grads = np.ones((8, 8), np.float32), np.full((8, 8), 0.3, np.float32)
    mu, nu = np.zeros((8, 8), np.float32), np.ones((8, 8), np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (params, mu, nu, grads))
    compiled = adam.lower(*shapes).compile()
    return compiled(*(jax.device_put(v, s) for v, s in zip((params, mu, nu, grads), (DEVICE, HOST, HOST, DEVICE))))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
