"""A replay ring buffer in host memory: the newest transition is written with
``dynamic_update_slice`` at the write head, and the batch mean (device) is read back."""

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[0]",)

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(HOST, DEVICE, DEVICE), out_shardings=(HOST, None), donate_argnums=0)
def push(ring, transition, head):
    ring = jax.lax.dynamic_update_slice_in_dim(ring, transition[None], head, axis=0)
    return ring, ring.mean(axis=0)


def example():
    ring = np.zeros((8, 6), np.float32)
    transition = np.arange(6, dtype=np.float32)
    head = np.int32(5)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(np.shape(v), v.dtype), (ring, transition, head))
    compiled = push.lower(*shapes).compile()
    return compiled(jax.device_put(ring, HOST), jax.device_put(transition, DEVICE), jax.device_put(head, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
