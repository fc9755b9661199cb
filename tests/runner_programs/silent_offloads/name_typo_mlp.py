"""A two-layer MLP whose activations were meant to go to host memory for the backward pass:
the policy offloads "hiden", the model tags "hidden"."""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[],
    names_which_can_be_offloaded=["hiden"],
    offload_src="device",
    offload_dst="pinned_host",
)


def mlp(params, x):
    hidden = checkpoint_name(jax.nn.gelu(x @ params["w1"]), "hidden")
    return hidden @ params["w2"]


def loss(params, x, y):
    prediction = jax.checkpoint(mlp, policy=POLICY)(params, x)  # expect: OFL1211 -
    return jnp.mean((prediction - y) ** 2)


train_grad = jax.jit(jax.grad(loss))

if __name__ == "__main__":
    params = {"w1": jnp.ones((128, 512)) * 0.01, "w2": jnp.ones((512, 128)) * 0.01}
    grads = train_grad(params, jnp.ones((16, 128)), jnp.zeros((16, 128)))
    print(float(grads["w1"].sum()))
