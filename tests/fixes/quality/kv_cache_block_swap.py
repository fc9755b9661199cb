"""Paged KV cache: blocks of the cache live on host and one block is swapped into the device
working set per step. The working set is updated with ``.at[].set`` from the host page and
returned as device memory; the host pages go back to host: error 1200 on the working set.
"""

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[1]",)

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(DEVICE, HOST, DEVICE), out_shardings=(None, HOST))
def swap_in(working, pages, page):
    block = pages[page]
    working = working.at[0].set(block * 1.0)
    return working, pages


def example():
    working = np.zeros((2, 4, 8), np.float32)
    pages = np.arange(4 * 4 * 8, dtype=np.float32).reshape(4, 4, 8)
    page = np.int32(2)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(np.shape(v), v.dtype), (working, pages, page))
    compiled = swap_in.lower(*shapes).compile()
    return compiled(jax.device_put(working, DEVICE), jax.device_put(pages, HOST), jax.device_put(page, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
