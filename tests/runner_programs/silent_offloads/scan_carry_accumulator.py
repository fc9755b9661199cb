"""A running sum carried through a scan and named for offload: returned by every step, never
saved for the backward pass."""

import jax
import jax.numpy as jnp
from jax import lax
from jax.ad_checkpoint import checkpoint_name

policy = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[],
    names_which_can_be_offloaded=["total"],
    offload_src="device",
    offload_dst="pinned_host",
)


def accumulate(total, x):
    return checkpoint_name(total + jnp.sin(x), "total"), None


def loss(xs):
    total, _ = lax.scan(jax.checkpoint(accumulate, policy=policy), jnp.zeros(xs.shape[1:]), xs)  # expect: OFL1211 -
    return jnp.sum(total**2)


grad = jax.jit(jax.grad(loss))

if __name__ == "__main__":
    print(float(grad(jnp.ones((32, 256))).sum()))
