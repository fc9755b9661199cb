"""The moments' host shardings built inline with ``jax.tree.map`` over the device tree, as a
user who offloads an existing optimizer writes it; the update reads the host moments."""

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[1]['mu']", "[1]['nu']")

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
OPT_ON_DEVICE = {"mu": DEVICE, "nu": DEVICE}
OPT_ON_HOST = jax.tree.map(lambda s: s.with_memory_kind("pinned_host"), OPT_ON_DEVICE)


@functools.partial(jax.jit, in_shardings=(DEVICE, OPT_ON_HOST, DEVICE))
def update(params, opt, grads):
    mu = 0.9 * opt["mu"] + 0.1 * grads
    nu = 0.99 * opt["nu"] + 0.01 * grads * grads
    return params - 0.01 * mu / (nu + 1e-6) ** 0.5, {"mu": mu, "nu": nu}


def example():
    params, grads = np.ones((8, 8), np.float32), np.full((8, 8), 0.5, np.float32)
    opt = {"mu": np.zeros((8, 8), np.float32), "nu": np.ones((8, 8), np.float32)}
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (params, opt, grads))
    compiled = update.lower(*shapes).compile()
    return compiled(jax.device_put(params, DEVICE), jax.device_put(opt, OPT_ON_HOST), jax.device_put(grads, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
