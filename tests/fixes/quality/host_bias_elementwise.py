"""A bias kept on host added to a device activation; the sum is returned as device memory."""

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ()

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(DEVICE, HOST))
def add_bias(x, bias):
    return jax.nn.relu(x + bias)


def example():
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    bias = np.full((8,), 0.1, np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (x, bias))
    compiled = add_bias.lower(*shapes).compile()
    return compiled(jax.device_put(x, DEVICE), jax.device_put(bias, HOST))


if __name__ == "__main__":
    print(np.shape(jax.device_get(example())))
