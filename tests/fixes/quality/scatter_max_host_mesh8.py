"""Per-bucket running maxima kept in a donated host buffer and updated by ``.at[].max``; the
normalised scores (device) are computed from the host maxima on an 8-device mesh."""

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[0]",)

MESH = Mesh(np.array(jax.devices()[:8]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, in_shardings=(HOST, DEVICE, DEVICE), out_shardings=(HOST, None), donate_argnums=0)
def track(maxima, buckets, scores):
    maxima = maxima.at[buckets].max(scores)
    return maxima, scores / maxima[buckets]


def example():
    maxima = np.ones((8,), np.float32)
    buckets = np.array([0, 2, 2, 5], np.int32)
    scores = np.array([3.0, 0.5, 4.0, 2.0], np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (maxima, buckets, scores))
    compiled = track.lower(*shapes).compile()
    return compiled(jax.device_put(maxima, HOST), jax.device_put(buckets, DEVICE), jax.device_put(scores, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
