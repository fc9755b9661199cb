"""Activations stashed with the pre-0.4.25 memory kind name ``unpinned_host`` and returned for
a later analysis pass; the stash is meant to be host memory. XLA error 1200 on TPU."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[1]",)

MESH = Mesh(np.array(jax.devices()[:8]), ("data",))
STASH = NamedSharding(MESH, P(), memory_kind="unpinned_host")


@jax.jit
def forward(w, x):
    hidden = jnp.tanh(x @ w)
    stash = jax.device_put(hidden, STASH)
    return hidden.sum(axis=-1), stash


def example():
    w = np.eye(8, dtype=np.float32)
    x = np.arange(16, dtype=np.float32).reshape(2, 8) / 16
    return forward(w, x)


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
