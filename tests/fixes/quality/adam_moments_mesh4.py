"""Adam whose moments live in pinned host memory between steps, on a 4-device mesh.

The step is compiled ahead of time from shapes; ``in_shardings`` streams the moments in from
host and ``out_shardings`` leaves ``mu``/``nu`` in host memory, but the Adam arithmetic runs on
them directly, so the parameters (a device output) are computed from host values: error 1200.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[1]['mu']", "[1]['nu']")

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")
OPT = {"mu": HOST, "nu": HOST}


@functools.partial(jax.jit, in_shardings=(DEVICE, OPT, DEVICE), out_shardings=(None, OPT))
def update(params, opt, grads):
    mu = 0.9 * opt["mu"] + 0.1 * grads
    nu = 0.999 * opt["nu"] + 0.001 * grads * grads
    params = params - 1e-3 * mu / (jnp.sqrt(nu) + 1e-8)
    return params, {"mu": mu, "nu": nu}


def values():
    params = np.arange(64, dtype=np.float32).reshape(8, 8) / 64
    return (
        params,
        {"mu": np.zeros((8, 8), np.float32), "nu": np.ones((8, 8), np.float32)},
        np.full((8, 8), 0.5, np.float32),
    )


def example():
    params, opt, grads = values()
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (params, opt, grads))
    compiled = update.lower(*shapes).compile()
    return compiled(jax.device_put(params, DEVICE), jax.device_put(opt, OPT), jax.device_put(grads, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
