"""Column-sharded weights with their momentum sharded the same way and kept on host (8 devices);
``out_shardings`` is not given and the momentum is returned beside the new weights."""

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[1]",)

MESH = Mesh(np.array(jax.devices()[:8]), ("model",))
COLUMNS = NamedSharding(MESH, P(None, "model"))
HOST_COLUMNS = NamedSharding(MESH, P(None, "model"), memory_kind="pinned_host")


@functools.partial(jax.jit, in_shardings=(COLUMNS, HOST_COLUMNS, COLUMNS))
def momentum_step(w, momentum, grads):
    momentum = 0.9 * momentum + grads
    return w - 0.05 * momentum, momentum


def example():
    w = np.ones((4, 16), np.float32)
    momentum = np.zeros((4, 16), np.float32)
    grads = np.full((4, 16), 0.5, np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (w, momentum, grads))
    compiled = momentum_step.lower(*shapes).compile()
    return compiled(jax.device_put(w, COLUMNS), jax.device_put(momentum, HOST_COLUMNS), jax.device_put(grads, COLUMNS))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
