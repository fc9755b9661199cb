"""An RNN whose hidden state, the scan's carry, is named for offload: the carry is each step's
output and the next step's input, never a residual of the step."""

import jax
import jax.numpy as jnp
from jax import lax
from jax.ad_checkpoint import checkpoint_name

policy = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[],
    names_which_can_be_offloaded=["state"],
    offload_src="device",
    offload_dst="pinned_host",
)


def cell(w, h, x):
    h = checkpoint_name(jnp.tanh(h @ w + x), "state")
    return h, None


@jax.jit
def grad(w, h0, xs):
    def loss(w):
        step = jax.checkpoint(lambda h, x: cell(w, h, x), policy=policy)
        return jnp.sum(lax.scan(step, h0, xs)[0])  # expect: OFL1211 -

    return jax.grad(loss)(w)


if __name__ == "__main__":
    print(float(grad(jnp.ones((128, 128)) * 0.01, jnp.zeros((8, 128)), jnp.ones((16, 8, 128))).sum()))
