"""Uses JAX eagerly and never calls jax.jit: nothing of the user's is compiled."""

import jax.numpy as jnp

total = jnp.arange(10.0).sum()
print("total", float(total))
