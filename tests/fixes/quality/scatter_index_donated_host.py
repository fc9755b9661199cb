"""Rows of a donated host buffer overwritten by an index-array scatter; the sum of the updated
rows, a device output, is read from the host buffer: error 1200. The buffer stays on host."""

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[0]",)

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(HOST, DEVICE, DEVICE), out_shardings=(HOST, None), donate_argnums=0)
def write_rows(buffer, rows, values):
    buffer = buffer.at[rows].set(values)
    return buffer, buffer[rows].sum()


def example():
    buffer = np.zeros((16, 4), np.float32)
    rows = np.array([1, 4, 9], np.int32)
    values = np.ones((3, 4), np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(np.shape(v), v.dtype), (buffer, rows, values))
    compiled = write_rows.lower(*shapes).compile()
    return compiled(jax.device_put(buffer, HOST), jax.device_put(rows, DEVICE), jax.device_put(values, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
