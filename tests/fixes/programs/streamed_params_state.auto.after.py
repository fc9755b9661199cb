"""Parameters streamed from host every step (``in_shardings``) and returned: the intent is that
they live on host between steps. The fix computes on them on device and keeps the returned
parameters host memory (``--strategy device`` brings them back to device instead, as asked)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

REGIMES = ("TYPED",)
MESH = jax.make_mesh((1,), ("data",))
DEVICE = NamedSharding(MESH, P())
HOST = NamedSharding(MESH, P(), memory_kind="pinned_host")


def loss_fn(params, x):
    return jnp.mean(jnp.tanh(x @ params["w"] + params["b"]) ** 2)


def step(params, x):
    params = jax.device_put(params, jax.memory.Space.Device)
    loss, grads = jax.value_and_grad(loss_fn)(params, x)
    params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    return params, loss


entry = jax.jit(step, in_shardings=(HOST, DEVICE), out_shardings=(HOST, None))


def _values():
    rng = np.random.default_rng(0)
    params = {"w": rng.normal(size=(8, 4)).astype(np.float32), "b": np.zeros((4,), np.float32)}
    return params, rng.normal(size=(16, 8)).astype(np.float32)


def abstract_args():
    return jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), _values())


def concrete_args():
    params, x = _values()
    return jax.device_put(params, HOST), jax.device_put(x, DEVICE)
