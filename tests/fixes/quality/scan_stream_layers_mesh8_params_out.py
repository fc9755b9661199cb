"""Streamed layer weights that are also updated and returned: SGD over a scanned MLP whose
stack lives in host memory on an 8-device mesh. The new stack goes back to host
(``out_shardings``); the loss, computed from host weights, is a device output: error 1200.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[0]",)

MESH = Mesh(np.array(jax.devices()[:8]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


def loss_fn(layers, x):
    def layer(h, w):
        return jnp.tanh(h @ w), None

    h, _ = jax.lax.scan(layer, x, layers)
    return jnp.mean(h**2)


@functools.partial(jax.jit, in_shardings=(HOST, DEVICE), out_shardings=(HOST, None), donate_argnums=0)
def sgd(layers, x):
    loss, grads = jax.value_and_grad(loss_fn)(layers, x)
    return layers - 0.1 * grads, loss


def example():
    rng = np.random.default_rng(2)
    layers = (rng.normal(size=(3, 8, 8)) / 3).astype(np.float32)
    x = rng.normal(size=(16, 8)).astype(np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (layers, x))
    compiled = sgd.lower(*shapes).compile()
    return compiled(jax.device_put(layers, HOST), jax.device_put(x, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
