"""An optimizer state as a NamedTuple (optax's style): the trace of gradients kept on host.

``out_shardings`` is left to JAX; the parameters come out of the host trace: error 1200.
"""

import functools
from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[1].trace",)

MESH = Mesh(np.array(jax.devices()[:4]), ("model",))
COLUMNS = NamedSharding(MESH, P(None, "model"))
HOST_COLUMNS = COLUMNS.with_memory_kind("pinned_host")


class TraceState(NamedTuple):
    trace: jax.Array
    count: jax.Array


STATE = TraceState(trace=HOST_COLUMNS, count=NamedSharding(MESH, P()))


@functools.partial(
    jax.jit, in_shardings=(COLUMNS, STATE, COLUMNS), out_shardings=(None, TraceState(HOST_COLUMNS, None))
)
def sgd_trace(params, state, grads):
    trace = 0.9 * state.trace + grads
    return params - 0.05 * trace, TraceState(trace, state.count + 1)


def example():
    params = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    state = TraceState(np.zeros((4, 8), np.float32), np.zeros((), np.int32))
    grads = np.ones((4, 8), np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (params, state, grads))
    compiled = sgd_trace.lower(*shapes).compile()
    return compiled(jax.device_put(params, COLUMNS), jax.device_put(state, STATE), jax.device_put(grads, COLUMNS))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
