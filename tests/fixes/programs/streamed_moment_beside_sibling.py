"""Adam with host-resident moments: ``mu`` is moved to device where the step reads it, ``nu``
was forgotten. The fix moves ``nu`` the same way, beside ``mu``, and nothing else."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

REGIMES = ("TYPED",)
MESH = jax.make_mesh((1,), ("data",))
ON_DEVICE = NamedSharding(MESH, P(), memory_kind="device")
ON_HOST = ON_DEVICE.with_memory_kind("pinned_host")
MOMENTS = {"w": ON_HOST, "b": ON_HOST}
OPT_SHARDINGS = {"count": ON_DEVICE, "mu": MOMENTS, "nu": MOMENTS}
PARAMS = {"w": ON_DEVICE, "b": ON_DEVICE}


def adam(params, grads, count, mu, nu):
    mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, mu, grads)
    nu = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, nu, grads)
    params = jax.tree.map(lambda p, m, v: p - 0.01 * m / (jnp.sqrt(v) + 1e-8) / count, params, mu, nu)
    return params, mu, nu


@functools.partial(
    jax.jit,
    in_shardings=(PARAMS, OPT_SHARDINGS, ON_DEVICE),
    out_shardings=(PARAMS, OPT_SHARDINGS, None),
)
def entry(params, opt_state, x):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p["w"] + p["b"]) ** 2))(params)
    count = opt_state["count"] + 1
    mu = jax.device_put(opt_state["mu"], ON_DEVICE)
    params, mu, nu = adam(params, grads, count.astype(jnp.float32), mu, opt_state["nu"])
    opt_state = {"count": count, "mu": jax.device_put(mu, ON_HOST), "nu": jax.device_put(nu, ON_HOST)}
    return params, opt_state, loss


def _values():
    params = {"w": np.linspace(-1, 1, 8, dtype=np.float32)[:, None], "b": np.zeros((1,), np.float32)}
    zeros = jax.tree.map(np.zeros_like, params)
    opt_state = {"count": np.zeros((), np.int32), "mu": zeros, "nu": zeros}
    x = np.arange(32, dtype=np.float32).reshape(4, 8) / 32
    return params, opt_state, x


def abstract_args():
    return jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), _values())


def concrete_args():
    params, opt_state, x = _values()
    return (jax.device_put(params, PARAMS), jax.device_put(opt_state, OPT_SHARDINGS), jax.device_put(x, ON_DEVICE))
