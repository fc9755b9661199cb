"""Prefill of a host-resident KV cache: the prompt's keys are written into the cache with
``dynamic_update_slice`` and the prompt's attention output (device) reads the host cache."""

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[1]",)

MESH = Mesh(np.array(jax.devices()[:8]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(DEVICE, HOST), out_shardings=(None, HOST), donate_argnums=1)
def prefill(prompt, cache):
    cache = jax.lax.dynamic_update_slice(cache, prompt, (0, 0))
    scores = jax.nn.softmax(prompt @ cache.T, axis=-1)
    return scores @ cache, cache


def example():
    prompt = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    cache = np.zeros((16, 8), np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (prompt, cache))
    compiled = prefill.lower(*shapes).compile()
    return compiled(jax.device_put(prompt, DEVICE), jax.device_put(cache, HOST))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
