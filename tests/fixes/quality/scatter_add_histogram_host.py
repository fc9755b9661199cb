"""A histogram of token counts accumulated in host memory by ``.at[].add``; the normalised
histogram returned to the caller (device) is computed from the host counts: error 1200."""

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[0]",)

MESH = Mesh(np.array(jax.devices()[:8]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(HOST, DEVICE), out_shardings=(HOST, None))
def count(counts, tokens):
    counts = counts.at[tokens].add(1.0)
    return counts, counts / counts.sum()


def example():
    counts = np.ones((32,), np.float32)
    tokens = np.array([0, 3, 3, 7, 31], np.int32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(np.shape(v), v.dtype), (counts, tokens))
    compiled = count.lower(*shapes).compile()
    return compiled(jax.device_put(counts, HOST), jax.device_put(tokens, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
