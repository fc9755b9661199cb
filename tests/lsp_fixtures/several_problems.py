"""Several functions whose host values reach device outputs (XLA error 1200 on TPU)."""

import functools

import jax
import jax.numpy as jnp
from jax.sharding import SingleDeviceSharding

host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


def scale(x):
    return x * 2


scale_on_host = jax.jit(scale, in_shardings=host)


@functools.partial(jax.jit, in_shardings=(host, None))
def add(x, y):
    # the sum stays in host memory
    return x + y


@jax.jit
def offload(x):
    h = jax.device_put(x, host)
    return jnp.sin(h), x
