"""Autoregressive decoding over a stack of layers streamed from host one at a time; the per-layer
keys are appended to a device cache. The logits read the host layer slices: error 1200."""

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ()

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(HOST, DEVICE))
def decode(layers, token):
    def layer(h, w):
        h = jax.nn.gelu(h @ w)
        return h, h.sum()

    h, per_layer = jax.lax.scan(layer, token, layers)
    return h, per_layer


def example():
    rng = np.random.default_rng(10)
    layers = (rng.normal(size=(16, 128, 128)) / 11).astype(np.float32)  # 1 MiB on host
    token = rng.normal(size=(128,)).astype(np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (layers, token))
    compiled = decode.lower(*shapes).compile()
    return compiled(jax.device_put(layers, HOST), jax.device_put(token, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
