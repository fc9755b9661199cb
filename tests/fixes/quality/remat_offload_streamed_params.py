"""An MLP trained with activation offloading (a remat policy that offloads the hidden layer to
pinned host memory for the backward pass) whose weights are also streamed in from host by
``in_shardings``. The loss and the new weights are computed from the host weights: error 1200.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ("[0]['w1']", "[0]['w2']")

MESH = Mesh(np.array(jax.devices()[:4]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")
PARAMS = {"w1": HOST, "w2": HOST}
OFFLOAD_HIDDEN = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[],
    names_which_can_be_offloaded=["hidden"],
    offload_src="device",
    offload_dst="pinned_host",
)


def mlp(params, x):
    hidden = checkpoint_name(jnp.tanh(x @ params["w1"]), "hidden")
    return hidden @ params["w2"]


def loss_fn(params, x):
    return jnp.mean(jax.checkpoint(mlp, policy=OFFLOAD_HIDDEN)(params, x) ** 2)


@functools.partial(jax.jit, in_shardings=(PARAMS, DEVICE), out_shardings=(PARAMS, None))
def train_step(params, x):
    loss, grads = jax.value_and_grad(loss_fn)(params, x)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), loss


def example():
    rng = np.random.default_rng(5)
    params = {
        "w1": (rng.normal(size=(8, 16)) / 3).astype(np.float32),
        "w2": (rng.normal(size=(16, 4)) / 4).astype(np.float32),
    }
    x = rng.normal(size=(4, 8)).astype(np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (params, x))
    compiled = train_step.lower(*shapes).compile()
    return compiled(jax.device_put(params, PARAMS), jax.device_put(x, DEVICE))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
