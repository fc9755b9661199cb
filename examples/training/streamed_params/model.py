"""The forward passes: the streaming one moves each layer's weights to the device just before
it uses them."""

import jax
import jax.numpy as jnp

from .shardings import DEVICE


def forward(params, x):
    """Expects ``in_shardings`` to bring the weights in: every layer computes on host data."""
    h = x
    for layer in params["layers"]:
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    return h @ params["head"]


def forward_streaming_everything(params, x):
    h = x
    for layer in params["layers"]:
        layer = jax.device_put(layer, DEVICE)
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    return h @ jax.device_put(params["head"], DEVICE)
