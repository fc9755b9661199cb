"""SGD with momentum whose state is a registered dataclass; the momentum buffer lives on host.

The state's sharding is the same dataclass with a host sharding in the ``momentum`` field and
``None`` elsewhere for the output. The new parameters are computed from the host momentum.
"""

import dataclasses
import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = (".momentum",)

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class State:
    params: jax.Array
    momentum: jax.Array
    step: jax.Array


STATE_IN = State(params=DEVICE, momentum=HOST, step=DEVICE)
STATE_OUT = State(params=None, momentum=HOST, step=None)


@functools.partial(jax.jit, in_shardings=(STATE_IN, DEVICE), out_shardings=STATE_OUT)
def step(state, grads):
    momentum = 0.9 * state.momentum + grads
    return State(params=state.params - 0.1 * momentum, momentum=momentum, step=state.step + 1)


def example():
    state = State(np.ones((8, 8), np.float32), np.zeros((8, 8), np.float32), np.zeros((), np.int32))
    grads = np.full((8, 8), 0.25, np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (state, grads))
    compiled = step.lower(*shapes).compile()
    return compiled(jax.device_put(state, STATE_IN), jax.device_put(grads, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
