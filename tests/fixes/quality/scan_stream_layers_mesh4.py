"""Layer weights streamed from host, one layer per scan step, on a 4-device mesh.

The stacked weights stay in pinned host memory; the author means each layer to be copied to
the device when the scan reaches it. Computing on the host slices directly makes the loss, a
device output, a host value: error 1200 (the dot itself is host compute TPU cannot build).
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
BATCH = NamedSharding(MESH, P("data"))


@functools.partial(jax.jit, in_shardings=(HOST, BATCH))
def forward(layers, x):
    def layer(h, w):
        return jnp.tanh(h @ w), None

    h, _ = jax.lax.scan(layer, x, layers)
    return jnp.mean(h**2)


def example():
    rng = np.random.default_rng(0)
    layers = (rng.normal(size=(8, 256, 256)) / 16).astype(np.float32)  # 2 MiB on host
    x = rng.normal(size=(8, 256)).astype(np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (layers, x))
    compiled = forward.lower(*shapes).compile()
    return compiled(jax.device_put(layers, HOST), jax.device_put(x, BATCH))


if __name__ == "__main__":
    print(jax.device_get(example()))
