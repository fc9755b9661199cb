"""SGD with momentum; the velocity follows the configuration's placement."""

import jax
import jax.numpy as jnp

from .shardings import DEVICE


def make_train_step(config):
    def loss_fn(params, batch):
        return jnp.mean((batch["x"] @ params["w"] - batch["y"]) ** 2)

    def train_step(state, batch):
        velocity = state["velocity"]
        if config.offload_opt_state:
            velocity = jax.device_put(velocity, DEVICE)
        loss, grads = jax.value_and_grad(loss_fn)(state["params"], batch)
        velocity = jax.tree.map(lambda v, g: config.momentum * v + g, velocity, grads)
        params = jax.tree.map(lambda p, v: p - config.learning_rate * v, state["params"], velocity)
        return {"params": params, "velocity": velocity}, loss

    return train_step


def make_eval_step(config):
    def eval_step(state, batch):
        """Reads the velocity's norm for logging, where it lives (host memory when offloaded)."""
        norm = jnp.sqrt(jnp.sum(state["velocity"]["w"] ** 2))
        return jnp.mean((batch["x"] @ state["params"]["w"] - batch["y"]) ** 2), norm

    return eval_step
