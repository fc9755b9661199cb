"""Training steps: a rematerialised stack whose residuals go to host memory, and a two-stage
pipeline whose forward stage stores its activations on host for the backward stage."""

import jax
import jax.numpy as jnp

from .policies import remat_block
from .shardings import ACTIVATIONS, DEVICE


def loss_with_offloaded_residuals(weights, x):
    h = x
    for w in weights:
        h = remat_block(w, h)
    return jnp.mean(h**2)


def remat_step(weights, x):
    loss, grads = jax.value_and_grad(loss_with_offloaded_residuals)(weights, x)
    return [w - 0.1 * g for w, g in zip(weights, grads)], loss


def forward_stage(w, x):
    """Stores the activation on host until the backward stage needs it."""
    return jax.device_put(jnp.tanh(x @ w), ACTIVATIONS)


def backward_stage(w, activation, cotangent):
    """Uses the stored activation where it lives: its gradient is host compute returned as device memory."""
    local = cotangent * (1 - activation**2)
    return local @ w.T


def backward_stage_fetching(w, activation, cotangent):
    activation = jax.device_put(activation, DEVICE)
    local = cotangent * (1 - activation**2)
    return local @ w.T
