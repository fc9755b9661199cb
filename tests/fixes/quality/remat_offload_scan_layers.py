"""Scanned layers with a remat policy offloading each layer's input to host, and the stacked
layer weights streamed from host memory on an 8-device mesh. The loss reads host slices.
Sized so that the layers, not the compilers' tile padding, decide the memory figures: 16 layers
of 256 x 256."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

INTENDED_HOST_OUTPUTS = ()

MESH = Mesh(np.array(jax.devices()[:8]), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = DEVICE.with_memory_kind("pinned_host")
POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[],
    names_which_can_be_offloaded=["layer_in"],
    offload_src="device",
    offload_dst="pinned_host",
)


def loss_fn(layers, x):
    @functools.partial(jax.checkpoint, policy=POLICY)
    def layer(h, w):
        h = checkpoint_name(h, "layer_in")
        return jnp.tanh(h @ w), None

    h, _ = jax.lax.scan(layer, x, layers)
    return jnp.mean(h**2)


@functools.partial(jax.jit, in_shardings=(HOST, DEVICE))
def grad_norm(layers, x):
    grads = jax.grad(loss_fn)(layers, x)
    return jnp.sqrt(jnp.sum(grads**2))


def example():
    rng = np.random.default_rng(6)
    layers = (rng.normal(size=(16, 256, 256)) / 16).astype(np.float32)
    x = rng.normal(size=(64, 256)).astype(np.float32)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (layers, x))
    compiled = grad_norm.lower(*shapes).compile()
    return compiled(jax.device_put(layers, HOST), jax.device_put(x, DEVICE))


if __name__ == "__main__":
    print(jax.device_get(example()))
