"""A jax.checkpoint-decorated block with a policy, applied to a host weight."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.checkpoint, policy=jax.checkpoint_policies.nothing_saveable)
def block(w, x):
    return jnp.tanh(x @ w)


def loss(w, x):
    return jnp.sum(block(w, x))


run = jax.jit(jax.value_and_grad(loss), in_shardings=(HOST, DEVICE))

if __name__ == "__main__":
    print(run(np.ones((8, 8), np.float32), np.ones((2, 8), np.float32))[0])
