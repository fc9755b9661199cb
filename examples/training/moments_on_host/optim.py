"""Adam, written out so that every array it touches is visible."""

import jax
import jax.numpy as jnp

B1, B2, EPS = 0.9, 0.999, 1e-8


def init(params):
    zeros = jax.tree.map(jnp.zeros_like, params)
    return {"count": jnp.zeros((), jnp.int32), "mu": zeros, "nu": zeros}


def update(params, grads, opt, learning_rate):
    count = opt["count"] + 1
    mu = jax.tree.map(lambda m, g: B1 * m + (1 - B1) * g, opt["mu"], grads)
    nu = jax.tree.map(lambda v, g: B2 * v + (1 - B2) * g * g, opt["nu"], grads)
    step = count.astype(jnp.float32)
    params = jax.tree.map(
        lambda p, m, v: p - learning_rate * (m / (1 - B1**step)) / (jnp.sqrt(v / (1 - B2**step)) + EPS),
        params, mu, nu,
    )
    return params, {"count": count, "mu": mu, "nu": nu}
