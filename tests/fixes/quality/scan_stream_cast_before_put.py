"""A bf16 host kernel cast to float32 before it is used: the cast runs on the host value, and
the projection (a device output) comes out of it: error 1200. The weights stay host memory.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ()

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(HOST, DEVICE))
def project(kernel, x):
    kernel = kernel.astype(jnp.float32)
    return x @ kernel


def example():
    kernel = (np.arange(64, dtype=np.float32).reshape(8, 8) / 64).astype(jnp.bfloat16)
    x = np.ones((4, 8), np.float32)
    shapes = (jax.ShapeDtypeStruct(kernel.shape, kernel.dtype), jax.ShapeDtypeStruct(x.shape, x.dtype))
    compiled = project.lower(*shapes).compile()
    return compiled(jax.device_put(kernel, HOST), jax.device_put(x, DEVICE))


if __name__ == "__main__":
    print(np.shape(jax.device_get(example())))
