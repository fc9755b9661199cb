"""The ``unpinned_host`` trap: offloading with the memory kind name of JAX < 0.4.25.

A small MLP trainer that guards against loss spikes: every step stashes the pre-update
weights off-device (a snapshot to roll back to), and its hidden activations are offloaded
by a remat policy. Both were written when the host memory kind was called
``"unpinned_host"``. Current JAX types an ``unpinned_host`` value as device memory, but
XLA still treats the annotation as a move to host: the returned snapshot is a host value
in an output whose memory kind is device (XLA error 1200 on TPU), and the remat policy
with ``offload_dst="unpinned_host"`` silently offloads nothing. Use ``"pinned_host"``.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import SingleDeviceSharding

WIDTH, HIDDEN, BATCH, STEPS = 8, 32, 32, 40
LEARNING_RATE, SPIKE_FACTOR = 0.05, 4.0

SNAPSHOT_SHARDING = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")
OFFLOAD_HIDDEN = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[],
    names_which_can_be_offloaded=["hidden"],
    offload_src="device",
    offload_dst="pinned_host",
)


def mlp(params, x):
    hidden = checkpoint_name(jnp.tanh(x @ params["w_in"]), "hidden")
    return hidden @ params["w_out"]


def loss_fn(params, batch):
    prediction = jax.checkpoint(mlp, policy=OFFLOAD_HIDDEN)(params, batch["x"])
    return jnp.mean((prediction - batch["y"]) ** 2)


@jax.jit
def train_step(params, batch):
    snapshot = jax.device_put(params, SNAPSHOT_SHARDING)
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    params = jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return params, snapshot, loss


def init_params(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "w_in": jnp.asarray(rng.normal(size=(WIDTH, HIDDEN)) / np.sqrt(WIDTH), jnp.float32),
        "w_out": jnp.asarray(rng.normal(size=(HIDDEN, 1)) / np.sqrt(HIDDEN), jnp.float32),
    }


def make_batch(seed):
    rng = np.random.default_rng(100 + seed)
    x = rng.normal(size=(BATCH, WIDTH)).astype(np.float32)
    return {"x": jnp.asarray(x), "y": jnp.asarray(np.sin(x[:, :1]) * np.cos(x[:, 1:2]))}


def main():
    params, best_loss, rollbacks = init_params(), float("inf"), 0
    for step in range(STEPS):
        params, snapshot, loss = train_step(params, make_batch(step % 8))
        if float(loss) > SPIKE_FACTOR * best_loss:
            params, rollbacks = snapshot, rollbacks + 1
        best_loss = min(best_loss, float(loss))
        if step % 10 == 0 or step == STEPS - 1:
            print(f"step {step:3d}  loss {float(loss):.4f}")
    print("rollbacks:", rollbacks)
    print("snapshot lives in:", snapshot["w_in"].sharding.memory_kind)


if __name__ == "__main__":
    main()
