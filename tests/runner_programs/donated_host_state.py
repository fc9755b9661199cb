"""Adam-style moments kept on host and donated, compiled ahead of time on one device.

``out_shardings`` leaves the parameters' memory kind to JAX (``None``), so JAX gives the
donated host buffer of the moment to the parameters, a device output of the same shape. On
TPU the step is error 1200 (the moment reaches the parameters on host); once the moment is
moved to device it compiles, and PjRt aborts the process on returning the parameters, on the
CPU as on a TPU v5e. ``offload-fixer run`` stops the program at that call and reports.
"""

import functools
import sys

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

MESH = Mesh(np.array(jax.devices()[:1]), ("data",))
ROWS = NamedSharding(MESH, P("data"))
HOST_ROWS = ROWS.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(ROWS, HOST_ROWS, ROWS), out_shardings=(None, HOST_ROWS), donate_argnums=1)
def update(params, mu, grads):
    if "--moved" in sys.argv:
        mu = jax.device_put(mu, jax.memory.Space.Device)
    mu = 0.9 * mu + 0.1 * grads  # expect: OFL1200 [0]
    return params - 0.01 * mu, mu


if __name__ == "__main__":
    params = np.ones((16, 4), np.float32)
    shape = jax.ShapeDtypeStruct(params.shape, params.dtype)
    step = update.lower(shape, shape, shape).compile()
    print("compiled", flush=True)
    new_params, _ = step(jax.device_put(params, ROWS), jax.device_put(params, HOST_ROWS), jax.device_put(params, ROWS))
    print("stepped", float(new_params.sum()))
