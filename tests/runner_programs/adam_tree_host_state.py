"""Adam over a two-layer MLP, its optimizer state streamed from host memory, as optax shapes it.

The parameters are a ``{"params": {"Dense_0": {"bias", "kernel"}, ...}}`` tree (flax's) and the
state ``(ScaleByAdamState(count, mu, nu), EmptyState())`` (``optax.adam``'s): 4 parameter leaves
and 9 state leaves. The step is jitted with the state in host memory (``in_shardings``) and
returns the new state through device outputs, so on TPU every parameter and state output is
reached by a host value (XLA error 1200) and the Adam arithmetic runs on the host on the way.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

FEATURES, HIDDEN, BATCH, STEPS = 8, 32, 64, 3
LEARNING_RATE, B1, B2, EPS = 1e-2, 0.9, 0.999, 1e-8
ON_DEVICE = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="device")
ON_HOST = ON_DEVICE.with_memory_kind("pinned_host")


class ScaleByAdamState(NamedTuple):
    count: jax.Array
    mu: dict
    nu: dict


class EmptyState(NamedTuple):
    pass


def init_params(key):
    k0, k1 = jax.random.split(key)
    return {
        "params": {
            "Dense_0": {"bias": jnp.zeros(HIDDEN), "kernel": jax.random.normal(k0, (FEATURES, HIDDEN)) * 0.1},
            "Dense_1": {"bias": jnp.zeros(1), "kernel": jax.random.normal(k1, (HIDDEN, 1)) * 0.1},
        }
    }


def init_state(params):
    zeros = jax.tree.map(jnp.zeros_like, params)
    return ScaleByAdamState(jnp.zeros((), jnp.int32), zeros, zeros), EmptyState()


def loss_fn(params, x, y):
    layers = params["params"]
    hidden = jax.nn.relu(x @ layers["Dense_0"]["kernel"] + layers["Dense_0"]["bias"])
    return jnp.mean((hidden @ layers["Dense_1"]["kernel"] + layers["Dense_1"]["bias"] - y) ** 2)


def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    adam, empty = opt_state
    count = adam.count + 1
    mu = jax.tree.map(lambda m, g: B1 * m + (1 - B1) * g, adam.mu, grads)
    nu = jax.tree.map(lambda v, g: B2 * v + (1 - B2) * g * g, adam.nu, grads)
    step = count.astype(jnp.float32)
    params = jax.tree.map(
        lambda p, m, v: p - LEARNING_RATE * (m / (1 - B1**step)) / (jnp.sqrt(v / (1 - B2**step)) + EPS),
        params,
        mu,
        nu,
    )
    return params, (ScaleByAdamState(count, mu, nu), empty), loss


step = jax.jit(train_step, in_shardings=(ON_DEVICE, ON_HOST, ON_DEVICE, ON_DEVICE))


def main():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH, FEATURES)).astype(np.float32)
    y = x @ np.linspace(-1.0, 1.0, FEATURES, dtype=np.float32)[:, None]
    params = init_params(jax.random.key(0))
    opt_state = init_state(params)
    # compiled for shapes, before the state is placed: what a trainer does ahead of time
    compiled = step.lower(*jax.eval_shape(lambda: (params, opt_state, x, y))).compile()
    for i in range(STEPS):
        opt_state = jax.device_put(opt_state, ON_HOST)  # the state waits on host between steps
        params, opt_state, loss = compiled(params, opt_state, x, y)
        print(f"step {i}  loss {float(loss):.4f}")


if __name__ == "__main__":
    main()
