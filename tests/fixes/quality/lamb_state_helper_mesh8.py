"""LAMB with its state tree's shardings built by the package's helper on an 8-device mesh; the
trust ratio and new parameters come out of the host moments."""

import jax
import jax.numpy as jnp
import numpy as np
from quality_shardings import make_mesh, train_state_shardings

INTENDED_HOST_OUTPUTS = ("['opt']['mu']['w']", "['opt']['mu']['b']", "['opt']['nu']['w']", "['opt']['nu']['b']")

SHARDINGS = train_state_shardings(make_mesh(8))


def lamb(state, grads):
    mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, state["opt"]["mu"], grads)
    nu = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, state["opt"]["nu"], grads)

    def update(p, m, v):
        step = m / (jnp.sqrt(v) + 1e-6)
        ratio = jnp.linalg.norm(p) / (jnp.linalg.norm(step) + 1e-6)
        return p - 0.01 * ratio * step

    params = jax.tree.map(update, state["params"], mu, nu)
    return {"params": params, "opt": {"mu": mu, "nu": nu}}


lamb_step = jax.jit(lamb, in_shardings=(SHARDINGS, SHARDINGS["params"]))


def example():
    params = {"w": np.full((4, 4), 0.5, np.float32), "b": np.ones((4,), np.float32)}
    state = {
        "params": params,
        "opt": {"mu": jax.tree.map(np.zeros_like, params), "nu": jax.tree.map(np.ones_like, params)},
    }
    grads = jax.tree.map(lambda p: p * 0.1, params)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (state, grads))
    compiled = lamb_step.lower(*shapes).compile()
    return compiled(jax.device_put(state, SHARDINGS), jax.device_put(grads, SHARDINGS["params"]))


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
