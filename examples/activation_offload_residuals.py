"""Activation offloading with the forward and backward passes in separate jitted steps.

The model and offload policy of ``activation_offload.py``, split the way pipeline-parallel
and gradient-accumulation loops split it: ``forward`` returns the loss together with the
``jax.vjp`` pullback, whose leaves include the residuals the policy offloaded to
``pinned_host``; ``backward`` applies the pullback and updates the parameters. Returning
host residuals from a jitted function is XLA error 1200 on JAX <= 0.4.28 (outputs were
device unless ``out_shardings`` said otherwise); JAX >= 0.4.29 gives those outputs a
``pinned_host`` memory kind, so with JAX 0.10.2 this program is correct.
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
def forward(params, batch):
    loss, pullback = jax.vjp(lambda p: loss_fn(p, batch), params)
    return loss, pullback


@jax.jit
def backward(params, pullback):
    (grads,) = pullback(jnp.ones((), jnp.float32))
    return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)


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
        loss, pullback = forward(params, make_batch(step % 4))
        params = backward(params, pullback)
        if step % 10 == 0 or step == STEPS - 1:
            print(f"step {step:3d}  loss {float(loss):.4f}")
    print(
        "offloaded residuals live in:",
        sorted({leaf.sharding.memory_kind for leaf in jax.tree.leaves(pullback)}),
    )


if __name__ == "__main__":
    main()
