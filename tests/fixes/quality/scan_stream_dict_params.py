"""A transformer-style stack of blocks whose weights (a dict of stacked arrays) are streamed
from host over the scan; the embedding stays on device. The logits come out of host weights.
"""

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ()

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")
BLOCKS = {"up": HOST, "down": HOST}


@functools.partial(jax.jit, in_shardings=(DEVICE, BLOCKS, DEVICE))
def logits(embed, blocks, tokens):
    def block(h, weights):
        return h + jax.nn.gelu(h @ weights["up"]) @ weights["down"], None

    h, _ = jax.lax.scan(block, embed[tokens], blocks)
    return h @ embed.T


def example():
    rng = np.random.default_rng(3)
    embed = (rng.normal(size=(32, 8)) / 8).astype(np.float32)
    blocks = {
        "up": (rng.normal(size=(2, 8, 16)) / 8).astype(np.float32),
        "down": (rng.normal(size=(2, 16, 8)) / 16).astype(np.float32),
    }
    tokens = np.arange(8, dtype=np.int32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (embed, blocks, tokens))
    compiled = logits.lower(*shapes).compile()
    return compiled(jax.device_put(embed, DEVICE), jax.device_put(blocks, BLOCKS), jax.device_put(tokens, DEVICE))


if __name__ == "__main__":
    print(np.shape(jax.device_get(example())))
