"""Offloading with TransferToMemoryKind (JAX 0.4.15 - 0.7.0), compiled ahead of time.

The value moved to host goes through ``jnp.tanh``, which loses the memory kind before JAX 0.7.1:
the output is declared device memory, error 1200 on TPU.
"""

import jax
import jax.numpy as jnp
from jax._src.sharding_impls import TransferToMemoryKind

TO_HOST = TransferToMemoryKind("pinned_host")


@jax.jit
def tanh_on_host(x):
    on_host = jax.device_put(x, TO_HOST)  # expect: OFL1200 ""
    return jnp.tanh(on_host)


if __name__ == "__main__":
    compiled = tanh_on_host.lower(jax.ShapeDtypeStruct((8,), jnp.float32)).compile()
    print("result", compiled(jnp.ones(8)).sum())
