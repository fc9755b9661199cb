"""A padding mask kept in host memory next to the data loader's buffers, used to zero the padded
positions of a device batch: the masked batch (device) is computed from the host mask."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ()

MESH = Mesh(np.array(jax.devices()[:8]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(DEVICE, HOST))
def masked_mean(batch, mask):
    return jnp.where(mask, batch, 0.0).sum(axis=1) / jnp.maximum(mask.sum(axis=1), 1)


def example():
    batch = np.arange(32, dtype=np.float32).reshape(4, 8)
    mask = np.arange(8)[None, :] < np.array([[8], [5], [2], [7]])
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (batch, mask))
    compiled = masked_mean.lower(*shapes).compile()
    return compiled(jax.device_put(batch, DEVICE), jax.device_put(mask, HOST))


if __name__ == "__main__":
    print(np.shape(jax.device_get(example())))
