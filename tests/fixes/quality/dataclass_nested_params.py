"""A dataclass train state holding a dict of parameters and a dict of host-resident moments;
its shardings are the same dataclass. The new parameters are computed from the host moments."""

import dataclasses
import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = (".moments['w']", ".moments['b']")

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class TrainState:
    params: dict
    moments: dict


SHARDINGS = TrainState(params={"w": DEVICE, "b": DEVICE}, moments={"w": HOST, "b": HOST})


@functools.partial(jax.jit, in_shardings=(SHARDINGS, DEVICE))
def train_step(state, scale):
    moments = jax.tree.map(lambda m, p: 0.9 * m + 0.1 * p * scale, state.moments, state.params)
    params = jax.tree.map(lambda p, m: p - 0.01 * m, state.params, moments)
    return TrainState(params=params, moments=moments)


def example():
    params = {"w": np.ones((4, 4), np.float32), "b": np.zeros((4,), np.float32)}
    state = TrainState(params=params, moments=jax.tree.map(np.zeros_like, params))
    scale = np.float32(2.0)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(np.shape(v), v.dtype), (state, scale))
    compiled = train_step.lower(*shapes).compile()
    return compiled(jax.device_put(state, SHARDINGS), jax.device_put(scale, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
