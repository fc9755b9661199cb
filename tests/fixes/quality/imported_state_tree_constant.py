"""The state's shardings are a tree another module builds at import and this one imports by
name (``from quality_shardings import STATE_SHARDINGS``); the update's parameters are computed
from the host moments and no ``out_shardings`` is given: error 1200."""

import jax
import numpy as np
from quality_shardings import STATE_SHARDINGS

INTENDED_HOST_OUTPUTS = ("['opt']['mu']['w']", "['opt']['mu']['b']", "['opt']['nu']['w']", "['opt']['nu']['b']")


def update(state, grads):
    mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, state["opt"]["mu"], grads)
    nu = jax.tree.map(lambda v, g: 0.99 * v + 0.01 * g * g, state["opt"]["nu"], grads)
    params = jax.tree.map(lambda p, m, v: p - 0.01 * m / (v + 1e-6) ** 0.5, state["params"], mu, nu)
    return {"params": params, "opt": {"mu": mu, "nu": nu}}


train_step = jax.jit(update, in_shardings=(STATE_SHARDINGS, STATE_SHARDINGS["params"]), donate_argnums=0)


def example():
    params = {"w": np.ones((4, 4), np.float32), "b": np.zeros((4,), np.float32)}
    state = {
        "params": params,
        "opt": {"mu": jax.tree.map(np.zeros_like, params), "nu": jax.tree.map(np.ones_like, params)},
    }
    grads = jax.tree.map(lambda p: p + 1.0, params)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (state, grads))
    compiled = train_step.lower(*shapes).compile()
    return compiled(jax.device_put(state, STATE_SHARDINGS), jax.device_put(grads, STATE_SHARDINGS["params"]))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
