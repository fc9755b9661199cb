"""A user decorator that wraps a helper with *args/**kwargs; the helper reads a host param."""

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


def traced(fn):
    @functools.wraps(fn)
    def inner(*args, **kwargs):
        return fn(*args, **kwargs)

    return inner


@traced
def layer(w, x):
    return jnp.tanh(x @ w)


def forward(w, x):
    return layer(w, x)


run = jax.jit(forward, in_shardings=(HOST, DEVICE))

if __name__ == "__main__":
    print(run(np.ones((8, 8), np.float32), np.ones((2, 8), np.float32)).shape)
