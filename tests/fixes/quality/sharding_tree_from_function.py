"""The new user's package: ``in_shardings`` built by a function in another module.

``SH = train_state_shardings(MESH)`` gives ``{"params": ..., "opt": {"mu", "nu"}}`` with the
moments on host; the update returns the state with ``out_shardings`` left to JAX, and the new
parameters are computed from the host moments: error 1200.
"""

import jax
import numpy as np
from quality_shardings import make_mesh, train_state_shardings

INTENDED_HOST_OUTPUTS = ("['opt']['mu']['w']", "['opt']['mu']['b']", "['opt']['nu']['w']", "['opt']['nu']['b']")

MESH = make_mesh(4)
SH = train_state_shardings(MESH)


def update(state, grads):
    opt = state["opt"]
    mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, opt["mu"], grads)
    nu = jax.tree.map(lambda v, g: 0.99 * v + 0.01 * g * g, opt["nu"], grads)
    params = jax.tree.map(lambda p, m, v: p - 0.01 * m / (v + 1e-6) ** 0.5, state["params"], mu, nu)
    return {"params": params, "opt": {"mu": mu, "nu": nu}}


step = jax.jit(update, in_shardings=(SH, SH["params"]), donate_argnums=0)


def values():
    params = {"w": np.ones((4, 4), np.float32), "b": np.zeros((4,), np.float32)}
    zeros = jax.tree.map(np.zeros_like, params)
    return {"params": params, "opt": {"mu": zeros, "nu": zeros}}, jax.tree.map(lambda p: p + 0.5, params)


def example():
    state, grads = values()
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (state, grads))
    compiled = step.lower(*shapes).compile()
    return compiled(jax.device_put(state, SH), jax.device_put(grads, SH["params"]))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
