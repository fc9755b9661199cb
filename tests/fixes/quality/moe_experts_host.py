"""Mixture of experts whose expert weights are kept on host: the router picks one expert per
call and the expert output (device) is computed from the host expert stack."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ()

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(DEVICE, HOST, DEVICE))
def route(router, experts, x):
    choice = jnp.argmax(jnp.mean(x @ router, axis=0))
    expert = jax.lax.dynamic_index_in_dim(experts, choice, keepdims=False)
    return x @ expert


def example():
    rng = np.random.default_rng(8)
    router = rng.normal(size=(8, 3)).astype(np.float32)
    experts = rng.normal(size=(3, 8, 8)).astype(np.float32)
    x = rng.normal(size=(4, 8)).astype(np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (router, experts, x))
    compiled = route.lower(*shapes).compile()
    return compiled(jax.device_put(router, DEVICE), jax.device_put(experts, HOST), jax.device_put(x, DEVICE))


if __name__ == "__main__":
    print(np.shape(jax.device_get(example())))
