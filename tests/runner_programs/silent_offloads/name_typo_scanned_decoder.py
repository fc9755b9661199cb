"""A decoder of layers applied with `lax.scan`, each layer's input offloaded to host memory for
the backward pass, as MaxText's offload presets do. The policy was written against an older
spelling of the tag: it offloads "decoder_layer_input", the model tags "decoder_layer_inputs"."""

import jax
import jax.numpy as jnp
from jax import lax
from jax.ad_checkpoint import checkpoint_name

OFFLOAD_LAYER_INPUTS = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=(),
    names_which_can_be_offloaded=("decoder_layer_input",),
    offload_src="device",
    offload_dst="pinned_host",
)


def layer(h, weights):
    h = checkpoint_name(h, "decoder_layer_inputs")
    attended = jax.nn.softmax(h @ weights["qk"] @ h.T, axis=-1) @ h
    return h + jax.nn.gelu(attended @ weights["mlp"]), None


def decode(stacked, h):
    block = jax.checkpoint(layer, policy=OFFLOAD_LAYER_INPUTS)
    return lax.scan(block, h, stacked)[0]  # expect: OFL1211 -


def loss(stacked, h):
    return jnp.mean(decode(stacked, h) ** 2)


grad_step = jax.jit(jax.grad(loss))

if __name__ == "__main__":
    stacked = {"qk": jnp.ones((4, 64, 64)) * 0.01, "mlp": jnp.ones((4, 64, 64)) * 0.01}
    grads = grad_step(stacked, jnp.ones((32, 64)))
    print(float(grads["mlp"].sum()))
