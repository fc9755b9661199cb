"""A snapshot of the weights stashed with the pre-0.4.25 memory kind name and returned from a
parenthesised, multi-line ``return (``: error 1200 on TPU. ``auto``/``host`` spell
``pinned_host`` (the snapshot stays host memory); ``device`` also moves it back to device in
that return."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import SingleDeviceSharding

REGIMES = ("TYPED",)
SNAPSHOT = SingleDeviceSharding(jax.devices()[0], memory_kind="unpinned_host")


@jax.jit
def entry(params, x):
    snapshot = jax.device_put(params, SNAPSHOT)
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p["w"]) ** 2))(params)
    params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    return (
        params,
        snapshot,
        loss,
    )


def _values():
    return {"w": np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)}, np.ones((2, 8), np.float32)


def abstract_args():
    return _values()


def concrete_args():
    return _values()
