"""Adam moments on host, 8-device data parallelism, the optimizer state donated.

``donate_argnums=1`` lets XLA reuse the host buffers of the moments for the new moments. The
parameters leave through a ``None`` output sharding, computed from the host moments: error 1200.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[1]['mu']", "[1]['nu']")

MESH = Mesh(np.array(jax.devices()[:8]), ("data",))
ROWS = NamedSharding(MESH, P("data"))
HOST_ROWS = ROWS.with_memory_kind("pinned_host")
OPT = {"mu": HOST_ROWS, "nu": HOST_ROWS}


@functools.partial(jax.jit, in_shardings=(ROWS, OPT, ROWS), out_shardings=(None, OPT), donate_argnums=1)
def update(params, opt, grads):
    mu = 0.9 * opt["mu"] + 0.1 * grads
    nu = 0.999 * opt["nu"] + 0.001 * jnp.square(grads)
    return params - 0.01 * mu * jax.lax.rsqrt(nu + 1e-8), {"mu": mu, "nu": nu}


def example():
    rng = np.random.default_rng(1)
    params = rng.normal(size=(16, 4)).astype(np.float32)
    grads = rng.normal(size=(16, 4)).astype(np.float32)
    opt = {"mu": np.zeros_like(params), "nu": np.ones_like(params)}
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (params, opt, grads))
    compiled = update.lower(*shapes).compile()
    return compiled(jax.device_put(params, ROWS), jax.device_put(opt, OPT), jax.device_put(grads, ROWS))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
