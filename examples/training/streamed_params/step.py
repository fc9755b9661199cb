"""Train steps: squared error of the MLP, SGD on the streamed weights."""

import jax
import jax.numpy as jnp

from .model import forward, forward_streaming_everything

LEARNING_RATE = 0.05


def mse(apply, params, batch):
    return jnp.mean((apply(params, batch["x"]) - batch["y"]) ** 2)


def sgd(params, grads):
    return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)


def train_step(params, batch):
    loss, grads = jax.value_and_grad(lambda p: mse(forward, p, batch))(params)
    return sgd(params, grads), loss


def train_step_streaming_everything(params, batch):
    loss, grads = jax.value_and_grad(lambda p: mse(forward_streaming_everything, p, batch))(params)
    return sgd(params, grads), loss
