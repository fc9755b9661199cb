"""Compiles the same functions over and over: each distinct compilation is checked once.

``sin_on_host`` moves a value to host and computes on it: the output, declared device
memory, is error 1200 on TPU. The move is spelled so that it runs on any CPU backend.
"""

import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import jit
from jax.sharding import SingleDeviceSharding

# JAX 0.4.15 - 0.7.0: the result of jnp.sin loses the memory kind. JAX 0.7.1+: JAX types
# unpinned_host as device memory while XLA moves the value to host.
try:
    from jax._src.sharding_impls import TransferToMemoryKind

    TO_HOST = TransferToMemoryKind("pinned_host")
except ImportError:
    TO_HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="unpinned_host")


@jax.jit
def sin_on_host(x):
    on_host = jax.device_put(x, TO_HOST)  # expect: OFL1200 ""
    return jnp.sin(on_host)


def scale(x, factor):
    return x * factor


def add_one(x):
    return x + 1


scale_by = jit(scale, static_argnums=1)


@functools.partial(jax.jit, static_argnames="power")
def raise_to(x, power):
    return x**power


def main(steps):
    x = np.ones(8, np.float32)
    for _ in range(steps):
        sin_on_host(x)  # the same signature each time
        # a new jit object around the same function each time
        jax.jit(add_one)(jnp.ones(4))
        scale_by(x, 3)
        raise_to(x, power=2)
    scale_by(x, 4)  # a new static value: a new compilation
    sin_on_host(np.ones(16, np.float32))  # a new shape: checked, the same finding
    print("done", steps)


if __name__ == "__main__":
    main(int(sys.argv[1]))
