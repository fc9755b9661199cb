"""The train steps: a linear model's loss, its gradients and one Adam update."""

import jax
import jax.numpy as jnp

from . import optim
from .shardings import REPLICATED

LEARNING_RATE = 0.05


def loss_fn(params, batch):
    prediction = batch["x"] @ params["w"] + params["b"]
    return jnp.mean((prediction - batch["y"]) ** 2)


def train_step(state, batch):
    """Trusts in_shardings/out_shardings to move the moments: the update runs on host
    values and the new parameters reach device outputs (error 1200 on TPU)."""
    loss, grads = jax.value_and_grad(loss_fn)(state["params"], batch)
    params, opt = optim.update(state["params"], grads, state["opt"], LEARNING_RATE)
    return {"params": params, "opt": opt}, loss


def train_step_moving_moments(state, batch):
    """Brings the moments to device first; out_shardings sends them back to host."""
    opt = dict(state["opt"])
    opt["mu"] = jax.device_put(opt["mu"], REPLICATED)
    opt["nu"] = jax.device_put(opt["nu"], REPLICATED)
    loss, grads = jax.value_and_grad(loss_fn)(state["params"], batch)
    params, opt = optim.update(state["params"], grads, opt, LEARNING_RATE)
    return {"params": params, "opt": opt}, loss
