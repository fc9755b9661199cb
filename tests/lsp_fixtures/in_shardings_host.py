"""A host in_shardings argument returned through a device output (XLA error 1200 on TPU)."""

import jax
from jax.sharding import SingleDeviceSharding

host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


def scale(x):
    return x * 2


scale_on_host = jax.jit(scale, in_shardings=host)
