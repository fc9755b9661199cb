"""LoRA fine-tuning with the frozen base weights in host memory and the adapters on device;
the adapted projection (device) reads the host base weights."""

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ()

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")
ADAPTER = {"a": DEVICE, "b": DEVICE}


@functools.partial(jax.jit, in_shardings=(HOST, ADAPTER, DEVICE))
def project(base, adapter, x):
    return x @ base + (x @ adapter["a"]) @ adapter["b"]


def example():
    rng = np.random.default_rng(9)
    base = rng.normal(size=(8, 8)).astype(np.float32)
    adapter = {"a": rng.normal(size=(8, 2)).astype(np.float32), "b": np.zeros((2, 8), np.float32)}
    x = rng.normal(size=(4, 8)).astype(np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (base, adapter, x))
    compiled = project.lower(*shapes).compile()
    return compiled(jax.device_put(base, HOST), jax.device_put(adapter, ADAPTER), jax.device_put(x, DEVICE))


if __name__ == "__main__":
    print(np.shape(jax.device_get(example())))
