"""Streamed weights read through a helper: ``forward`` is a plain function the jitted loss
calls, and the scan over the host stack is inside it. The loss is computed from host slices.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ()

MESH = Mesh(np.array(jax.devices()[:8]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = NamedSharding(MESH, P(), memory_kind="pinned_host")


def forward(stack, x):
    def layer(h, w):
        return jax.nn.relu(h @ w), None

    return jax.lax.scan(layer, x, stack)[0]


def loss(stack, x, y):
    return jnp.mean((forward(stack, x) - y) ** 2)


loss_step = jax.jit(loss, in_shardings=(HOST, DEVICE, DEVICE))


def example():
    rng = np.random.default_rng(4)
    stack = (rng.normal(size=(5, 8, 8)) / 3).astype(np.float32)
    x = rng.normal(size=(4, 8)).astype(np.float32)
    y = np.zeros((4, 8), np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (stack, x, y))
    compiled = loss_step.lower(*shapes).compile()
    return compiled(jax.device_put(stack, HOST), jax.device_put(x, DEVICE), jax.device_put(y, DEVICE))


if __name__ == "__main__":
    print(jax.device_get(example()))
