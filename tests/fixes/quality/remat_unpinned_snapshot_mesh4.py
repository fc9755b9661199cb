"""A loss-spike guard written for JAX < 0.4.25: the pre-update weights are stashed off-device
as ``unpinned_host`` on a 4-device mesh and returned; current XLA treats the annotation as a
move to host into a device output: error 1200. The snapshot is meant to live in host memory.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[1]",)

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
SNAPSHOT = NamedSharding(MESH, P(), memory_kind="unpinned_host")


@jax.jit
def guarded_step(w, x):
    snapshot = jax.device_put(w, SNAPSHOT)
    loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w) ** 2))(w)
    return w - 0.1 * grad, snapshot, loss


def example():
    w = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
    x = np.ones((2, 8), np.float32)
    return guarded_step(w, x)


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
