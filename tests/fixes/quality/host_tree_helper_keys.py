"""Running statistics kept on host, their shardings built by a helper over the key names.

``host_tree(MESH, ("mean", "var"))`` streams both in; the normalised batch, a device output,
is computed from them: error 1200.
"""

import functools

import jax
import numpy as np
from quality_shardings import host_tree, make_mesh, replicated

INTENDED_HOST_OUTPUTS = ("[1]['mean']", "[1]['var']")

MESH = make_mesh(4)
STATS = host_tree(MESH, ("mean", "var"))
DEVICE = replicated(MESH)


@functools.partial(jax.jit, in_shardings=(DEVICE, STATS), out_shardings=(None, STATS))
def normalise(x, stats):
    mean = 0.9 * stats["mean"] + 0.1 * x.mean(axis=0)
    var = 0.9 * stats["var"] + 0.1 * x.var(axis=0)
    return (x - mean) / (var + 1e-5) ** 0.5, {"mean": mean, "var": var}


def example():
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    stats = {"mean": np.zeros(4, np.float32), "var": np.ones(4, np.float32)}
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (x, stats))
    compiled = normalise.lower(*shapes).compile()
    return compiled(jax.device_put(x, DEVICE), jax.device_put(stats, STATS))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
