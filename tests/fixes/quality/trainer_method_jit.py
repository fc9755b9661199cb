"""A ``Trainer`` class that jits its bound method with shardings held on the instance; the
momentum lives on host (8 devices) and the new weights are computed from it: error 1200."""

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[1]",)

MESH = Mesh(np.array(jax.devices()[:8]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


class Trainer:
    def __init__(self, learning_rate):
        self.learning_rate = learning_rate
        self.step = jax.jit(self.update, in_shardings=(DEVICE, HOST, DEVICE))

    def update(self, w, momentum, grads):
        momentum = 0.9 * momentum + grads
        return w - self.learning_rate * momentum, momentum


TRAINER = Trainer(0.1)


def example():
    w, momentum, grads = np.ones((8, 4), np.float32), np.zeros((8, 4), np.float32), np.full((8, 4), 0.5, np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (w, momentum, grads))
    compiled = TRAINER.step.lower(*shapes).compile()
    return compiled(jax.device_put(w, DEVICE), jax.device_put(momentum, HOST), jax.device_put(grads, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
