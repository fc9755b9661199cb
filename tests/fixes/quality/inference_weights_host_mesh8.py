"""An inference server that keeps the model weights in host memory (they do not fit beside the
batch) and runs the forward pass on an 8-device mesh; the logits are read from host weights."""

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ()

MESH = Mesh(np.array(jax.devices()[:8]), ("batch",))
BATCH = NamedSharding(MESH, P("batch"))
WEIGHTS = NamedSharding(MESH, P(), memory_kind="pinned_host")
PARAMS = {"hidden": WEIGHTS, "out": WEIGHTS}


@functools.partial(jax.jit, in_shardings=(PARAMS, BATCH))
def serve(params, x):
    return jax.nn.log_softmax(jax.nn.relu(x @ params["hidden"]) @ params["out"])


def example():
    rng = np.random.default_rng(7)
    params = {"hidden": rng.normal(size=(8, 16)).astype(np.float32), "out": rng.normal(size=(16, 4)).astype(np.float32)}
    x = rng.normal(size=(16, 8)).astype(np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (params, x))
    compiled = serve.lower(*shapes).compile()
    return compiled(jax.device_put(params, PARAMS), jax.device_put(x, BATCH))


if __name__ == "__main__":
    print(np.shape(jax.device_get(example())))
