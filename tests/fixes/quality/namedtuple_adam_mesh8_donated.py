"""optax-style ``ScaleByAdamState`` NamedTuple with both moments on host, donated, on an 8-device
mesh; ``count`` stays on device. The updates (device) come out of the host moments."""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[1].mu", "[1].nu")

MESH = Mesh(np.array(jax.devices()[:8]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


class ScaleByAdamState(NamedTuple):
    count: jax.Array
    mu: jax.Array
    nu: jax.Array


STATE = ScaleByAdamState(count=DEVICE, mu=HOST, nu=HOST)


@functools.partial(jax.jit, in_shardings=(DEVICE, STATE), out_shardings=(None, STATE), donate_argnums=1)
def scale_by_adam(grads, state):
    mu = 0.9 * state.mu + 0.1 * grads
    nu = 0.999 * state.nu + 0.001 * grads**2
    count = state.count + 1
    updates = mu / (jnp.sqrt(nu) + 1e-8)
    return updates, ScaleByAdamState(count=count, mu=mu, nu=nu)


def example():
    grads = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    state = ScaleByAdamState(np.zeros((), np.int32), np.zeros((8, 8), np.float32), np.ones((8, 8), np.float32))
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(np.shape(v), v.dtype), (grads, state))
    compiled = scale_by_adam.lower(*shapes).compile()
    return compiled(jax.device_put(grads, DEVICE), jax.device_put(state, STATE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
