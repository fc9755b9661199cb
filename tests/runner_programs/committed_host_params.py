"""Parameters restored to host memory, then a jitted step that reads them without moving them.

From JAX 0.7.1 a committed ``pinned_host`` array is typed host memory, and JAX refuses to
trace the product and the sum that meet device values (``ValueError: memory_space of all
inputs passed to `dot_general` must be the same``): the step never runs.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec


@jax.jit
def loss(params, x):
    hidden = x @ params["w"]  # expect-refused: dot_general params['w']
    return jnp.mean((hidden + params["b"]) ** 2)  # expect-refused: add params['b']


def main():
    mesh = jax.sharding.Mesh(jax.devices()[:1], ("data",))
    host = NamedSharding(mesh, PartitionSpec(), memory_kind="pinned_host")
    params = jax.device_put({"w": jnp.ones((8, 4)), "b": jnp.zeros((4,))}, host)
    print("loss", float(loss(params, jnp.ones((16, 8)))))


if __name__ == "__main__":
    main()
