"""Layer weights kept in host memory and scanned over, one layer per step: the dot with each
host slice would be host compute the TPU backend cannot build (a loop dot with a device
operand, OFL1207). The fix moves each layer to device where the scan body starts, so one layer
at a time is in device memory, not the whole stack; the result stays host memory, as declared."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

REGIMES = ("TYPED",)
MESH = jax.make_mesh((1,), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = NamedSharding(MESH, P(), memory_kind="pinned_host")


def forward(weights, x):
    def layer(h, w):
        w = jax.device_put(w, jax.memory.Space.Device)
        return jnp.tanh(h @ w), None

    h, _ = lax.scan(layer, x, weights)
    return h


entry = jax.jit(forward, in_shardings=(HOST, DEVICE), out_shardings=HOST)


def _values():
    rng = np.random.default_rng(0)
    weights = (rng.normal(size=(3, 32, 32)) / np.sqrt(32)).astype(np.float32)
    return weights, rng.normal(size=(8, 32)).astype(np.float32)


def abstract_args():
    return jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), _values())


def concrete_args():
    weights, x = _values()
    return jax.device_put(weights, HOST), jax.device_put(x, DEVICE)
