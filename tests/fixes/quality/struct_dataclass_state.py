"""A ``flax.struct``-style state (a frozen dataclass registered as a pytree, ``step`` static
metadata) whose EMA of the parameters is kept on host; the EMA is also what the step reads
to compute the returned parameters, so they come out of host memory: error 1200.
"""

import dataclasses
import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = (".ema",)

MESH = Mesh(np.array(jax.devices()[:8]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.tree_util.register_dataclass, data_fields=["params", "ema"], meta_fields=["decay"])
@dataclasses.dataclass(frozen=True)
class TrainState:
    params: jax.Array
    ema: jax.Array
    decay: float = 0.99

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


IN = TrainState(params=DEVICE, ema=HOST)
OUT = TrainState(params=None, ema=HOST)


@functools.partial(jax.jit, in_shardings=(IN, DEVICE), out_shardings=OUT)
def train_step(state, grads):
    ema = state.decay * state.ema + (1 - state.decay) * state.params
    return state.replace(params=0.5 * (state.params - 0.1 * grads + ema), ema=ema)


def example():
    state = TrainState(np.ones((8, 4), np.float32), np.zeros((8, 4), np.float32))
    grads = np.full((8, 4), 0.5, np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (state, grads))
    compiled = train_step.lower(*shapes).compile()
    return compiled(jax.device_put(state, IN), jax.device_put(grads, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
