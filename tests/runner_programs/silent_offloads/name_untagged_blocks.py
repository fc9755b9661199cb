"""A stack of residual blocks under a scan, with a policy that offloads the attention output
by a name the blocks never tag (they tag "mlp_out" only)."""

import jax
import jax.numpy as jnp
from jax import lax
from jax.ad_checkpoint import checkpoint_name


def block(h, w):
    attention = jnp.tanh(h @ w)
    return h + checkpoint_name(jax.nn.relu(attention @ w.T), "mlp_out"), None


policy = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=["mlp_out"],
    names_which_can_be_offloaded=["attn_out"],
    offload_src="device",
    offload_dst="pinned_host",
)


@jax.jit
def step(layers, x):
    def loss(layers):
        out, _ = lax.scan(jax.checkpoint(block, policy=policy), x, layers)  # expect: OFL1211 -
        return jnp.sum(out**2)

    return jax.grad(loss)(layers)


if __name__ == "__main__":
    print(float(step(jnp.ones((4, 128, 128)) * 0.01, jnp.ones((8, 128))).sum()))
