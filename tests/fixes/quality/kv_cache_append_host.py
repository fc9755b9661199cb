"""A decode step whose KV cache lives in host memory: the new key/value row is written into
the cache at the current position and attention reads the whole cache. The cache goes back to
host (``out_shardings``); the attention output, read from the host cache, is device: error 1200.
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


@functools.partial(jax.jit, in_shardings=(DEVICE, HOST, DEVICE), out_shardings=(None, HOST), donate_argnums=1)
def decode(query, cache, position):
    cache = jax.lax.dynamic_update_slice(cache, query[None, :], (position, 0))
    scores = jax.nn.softmax(cache @ query)
    return scores @ cache, cache


def example():
    query = np.linspace(0, 1, 8, dtype=np.float32)
    cache = np.ones((16, 8), np.float32)
    position = np.int32(3)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(np.shape(v), v.dtype), (query, cache, position))
    compiled = decode.lower(*shapes).compile()
    return compiled(jax.device_put(query, DEVICE), jax.device_put(cache, HOST), jax.device_put(position, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
