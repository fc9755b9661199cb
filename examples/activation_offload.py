"""Activation offloading: a residual MLP whose saved activations are stashed in host memory.

Each block is rematerialised with ``jax.checkpoint`` and a policy that offloads the
activation named ``"hidden"`` to ``pinned_host`` during the forward pass and brings it
back for the backward pass, instead of keeping it in device memory or recomputing it.
``jax.value_and_grad`` consumes the offloaded residuals inside the same jitted step, so
no host value ever reaches an output.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name

N_BLOCKS, WIDTH, HIDDEN, BATCH, STEPS = 2, 8, 32, 16, 30
LEARNING_RATE = 0.05

OFFLOAD_HIDDEN = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[],
    names_which_can_be_offloaded=["hidden"],
    offload_src="device",
    offload_dst="pinned_host",
)


def block(x, weights):
    w_in, w_out = weights
    hidden = checkpoint_name(jax.nn.gelu(x @ w_in), "hidden")
    return x + hidden @ w_out, None


def loss_fn(params, batch):
    x, _ = jax.lax.scan(jax.checkpoint(block, policy=OFFLOAD_HIDDEN), batch["x"], params["blocks"])
    return jnp.mean((x @ params["head"] - batch["y"]) ** 2)


@jax.jit
def train_step(params, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads), loss


def init_params(seed=0):
    rng = np.random.default_rng(seed)
    w_in = rng.normal(size=(N_BLOCKS, WIDTH, HIDDEN)) / np.sqrt(WIDTH)
    w_out = rng.normal(size=(N_BLOCKS, HIDDEN, WIDTH)) / np.sqrt(HIDDEN) * 0.1
    head = rng.normal(size=(WIDTH, 1)) / np.sqrt(WIDTH)
    return jax.tree.map(
        lambda a: jnp.asarray(a, jnp.float32), {"blocks": (w_in, w_out), "head": head}
    )


def make_batch(seed):
    rng = np.random.default_rng(100 + seed)
    x = rng.normal(size=(BATCH, WIDTH)).astype(np.float32)
    return {"x": jnp.asarray(x), "y": jnp.asarray(np.tanh(x[:, :1] - x[:, 1:2]))}


def main():
    params = init_params()
    for step in range(STEPS):
        params, loss = train_step(params, make_batch(step % 4))
        if step % 10 == 0 or step == STEPS - 1:
            print(f"step {step:3d}  loss {float(loss):.4f}")


if __name__ == "__main__":
    main()
