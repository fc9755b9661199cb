"""A policy of the user's own that offloads the results of contractions over two dimensions,
applied to a function whose products all contract one: it matches no operation."""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import Offloadable


def offload_double_contractions(prim, *avals, **params):
    if prim.name == "dot_general":
        (contracting, _), _ = params["dimension_numbers"]
        if len(contracting) == 2:
            return Offloadable(src="device", dst="pinned_host")
    return False


def layer(w, x):
    return jnp.tanh(jnp.tanh(x @ w) @ w)


@jax.jit
def grad(w, x):
    return jax.grad(lambda w: jnp.sum(jax.checkpoint(layer, policy=offload_double_contractions)(w, x)))(w)  # expect: OFL1211 -


if __name__ == "__main__":
    print(float(grad(jnp.ones((128, 128)) * 0.01, jnp.ones((8, 128))).sum()))
