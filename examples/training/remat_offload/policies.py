"""Which residuals the backward pass recomputes, keeps, or offloads to host memory."""

import jax
from jax.ad_checkpoint import checkpoint_name

OFFLOAD_HIDDEN = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[],
    names_which_can_be_offloaded=["hidden"],
    offload_src="device",
    offload_dst="pinned_host",
)


def block(w, h):
    # The pre-activation, which the backward pass needs: the residual the policy offloads.
    return jax.numpy.tanh(checkpoint_name(h @ w, "hidden"))


remat_block = jax.checkpoint(block, policy=OFFLOAD_HIDDEN)
