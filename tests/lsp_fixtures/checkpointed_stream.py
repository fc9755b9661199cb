"""Weights streamed from host through a rematerialised layer, the memory kind read from the
environment at run time.

The static check cannot know what the environment will say; ``offload-fixer run`` lowers the
jit for TPU and finds the host weights reaching a device output.
"""

import functools
import os

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

MESH = jax.make_mesh((1,), ("data",))
ON_HOST = NamedSharding(MESH, PartitionSpec(), memory_kind=os.environ.get("WEIGHTS_MEMORY", "pinned_host"))


@functools.partial(jax.jit, in_shardings=(ON_HOST,))
def scale(weights):
    return jax.checkpoint(lambda w: jnp.tanh(w) * 2.0)(weights)


if __name__ == "__main__":
    compiled = scale.lower(jax.ShapeDtypeStruct((4,), jnp.float32)).compile()
    print("compiled", type(compiled).__name__)
