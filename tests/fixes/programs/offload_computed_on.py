"""An activation offloaded to host and then computed on there by mistake (OFL1201): the
result is moved to device, but the sine runs on the host CPU. The fix moves the operand back
to device where it is computed on; the offloaded copy stays host memory."""

import jax
import jax.numpy as jnp
import numpy as np

REGIMES = ("TYPED",)


@jax.jit
def entry(x):
    saved = jax.device_put(x * 3, jax.memory.Space.Host)
    y = jnp.sin(saved) * 2
    return jax.device_put(y, jax.memory.Space.Device), saved


def abstract_args():
    return (jax.ShapeDtypeStruct((8, 128), np.float32),)


def concrete_args():
    return (np.linspace(0, 1, 8 * 128, dtype=np.float32).reshape(8, 128),)
