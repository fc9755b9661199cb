"""A step whose shardings are imported names from the package's sharding module (built there by
``replicated``); the running mean is kept on host and the centred batch is read from it."""

import functools

import jax
import numpy as np
from quality_shardings import make_mesh, replicated

INTENDED_HOST_OUTPUTS = ("[1]",)

MESH = make_mesh(8)
ON_DEVICE = replicated(MESH)
ON_HOST = replicated(MESH, "pinned_host")


@functools.partial(jax.jit, in_shardings=(ON_DEVICE, ON_HOST), out_shardings=(None, ON_HOST))
def centre(x, mean):
    mean = 0.95 * mean + 0.05 * x.mean(axis=0)
    return x - mean, mean


def example():
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    mean = np.zeros((4,), np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (x, mean))
    compiled = centre.lower(*shapes).compile()
    return compiled(jax.device_put(x, ON_DEVICE), jax.device_put(mean, ON_HOST))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
