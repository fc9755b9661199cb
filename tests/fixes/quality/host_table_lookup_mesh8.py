"""An embedding table held in host memory, gathered by token ids on an 8-device mesh; the
gathered rows (a device output) are read from the host table: error 1200."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ()

MESH = Mesh(np.array(jax.devices()[:8]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(HOST, DEVICE))
def embed(table, ids):
    return jnp.take(table, ids, axis=0) * 2.0


def example():
    table = np.arange(128, dtype=np.float32).reshape(16, 8)
    ids = np.array([1, 3, 5, 7], np.int32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (table, ids))
    compiled = embed.lower(*shapes).compile()
    return compiled(jax.device_put(table, HOST), jax.device_put(ids, DEVICE))


if __name__ == "__main__":
    print(np.shape(jax.device_get(example())))
