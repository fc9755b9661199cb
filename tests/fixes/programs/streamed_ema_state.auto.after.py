"""A moving average of the weights kept on host between steps: ``in_shardings`` streams it in,
and the function returns its update, one array. The fix computes the update on device and
keeps the average it returns host memory (``--strategy device`` returns it as device memory,
as asked)."""

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

REGIMES = ("TYPED",)
MESH = jax.make_mesh((1,), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = NamedSharding(MESH, P(), memory_kind="pinned_host")
DECAY = 0.9


def update_ema(ema, w):
    ema = jax.device_put(ema, jax.memory.Space.Device)
    return DECAY * ema + (1 - DECAY) * w


entry = jax.jit(update_ema, in_shardings=(HOST, DEVICE), out_shardings=HOST)


def _values():
    rng = np.random.default_rng(0)
    return rng.normal(size=(16,)).astype(np.float32), rng.normal(size=(16,)).astype(np.float32)


def abstract_args():
    return jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), _values())


def concrete_args():
    ema, w = _values()
    return jax.device_put(ema, HOST), jax.device_put(w, DEVICE)
