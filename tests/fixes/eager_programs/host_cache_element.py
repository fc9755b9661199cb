"""A host cache read eagerly, one element of a 2-D host array: a slice in two dimensions, which
libtpu 0.0.42.1 cannot copy from host memory (OFL1208, fixed in libtpu 0.0.46.3): the edit is
written only under ``--strategy workaround``."""

import jax
import jax.numpy as jnp

cache = jax.device_put(jnp.arange(32.0 * 8).reshape(32, 8), jax.memory.Space.Host)
print("element:", float(cache[16, 0]))
