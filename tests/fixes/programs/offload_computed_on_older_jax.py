"""An offloaded activation computed on before it is returned: with JAX 0.4.29 - 0.7.0 the
computation loses the host memory kind, so a host value reaches a device output (error 1200),
and the multiply runs on the host CPU (OFL1201). The fix moves the operand back to device
where it is computed on, spelled with the file's own ``TransferToMemoryKind``."""

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.sharding_impls import TransferToMemoryKind

REGIMES = ("PROPAGATION",)
NOT_FIXABLE = {
    "host": "no sharding in scope says pinned_host (JAX 0.4.35's CPU backend cannot build one), so "
            "declaring the output host memory needs a guessed SingleDeviceSharding: unsafe",
}


@jax.jit
def entry(x):
    saved = jax.device_put(jnp.tanh(x), TransferToMemoryKind("pinned_host"))
    return saved * 2, x + 1


def abstract_args():
    return (jax.ShapeDtypeStruct((8, 128), np.float32),)


def concrete_args():
    return (np.linspace(-1, 1, 8 * 128, dtype=np.float32).reshape(8, 128),)
