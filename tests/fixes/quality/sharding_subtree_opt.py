"""The optimizer step of a package whose sharding tree comes from another module, jitted on
its subtree ``SH["opt"]``: the moments stream in from host, the returned parameters are
computed from them with no ``out_shardings``: error 1200.
"""

import jax
import numpy as np
from quality_shardings import make_mesh, train_state_shardings

INTENDED_HOST_OUTPUTS = ("[1]['mu']['w']", "[1]['mu']['b']", "[1]['nu']['w']", "[1]['nu']['b']")

SH = train_state_shardings(make_mesh(8))


def apply_adam(params, opt, grads):
    mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, opt["mu"], grads)
    nu = jax.tree.map(lambda v, g: 0.99 * v + 0.01 * g * g, opt["nu"], grads)
    params = jax.tree.map(lambda p, m, v: p - 0.01 * m / (v + 1e-6) ** 0.5, params, mu, nu)
    return params, {"mu": mu, "nu": nu}


adam = jax.jit(apply_adam, in_shardings=(SH["params"], SH["opt"], SH["params"]))


def example():
    params = {"w": np.ones((4, 4), np.float32), "b": np.zeros((4,), np.float32)}
    opt = {"mu": jax.tree.map(np.zeros_like, params), "nu": jax.tree.map(np.ones_like, params)}
    grads = jax.tree.map(lambda p: p + 0.25, params)
    shapes = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), (params, opt, grads))
    compiled = adam.lower(*shapes).compile()
    return compiled(
        jax.device_put(params, SH["params"]), jax.device_put(opt, SH["opt"]), jax.device_put(grads, SH["params"])
    )


if __name__ == "__main__":
    print(jax.tree.map(np.shape, jax.device_get(example())))
