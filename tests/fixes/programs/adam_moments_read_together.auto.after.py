"""An optax-style Adam step whose moments were restored to ``pinned_host`` (a checkpoint
restored with host shardings), read together: ``mu, nu = opt_state["mu"], opt_state["nu"]``.
The fix moves each moment to device in that statement, the one edit it needs: never two
``device_put`` lines and then ``mu, nu = mu, nu``."""

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
PARAMS = {"w": ON_DEVICE, "b": ON_DEVICE}
RESTORED = {"count": ON_DEVICE, "mu": {"w": ON_HOST, "b": ON_HOST}, "nu": {"w": ON_HOST, "b": ON_HOST}}
B1, B2, LR, EPS = 0.9, 0.999, 1e-2, 1e-8


def loss_fn(params, x, y):
    return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)


@functools.partial(
    jax.jit,
    in_shardings=(PARAMS, RESTORED, ON_DEVICE, ON_DEVICE),
    out_shardings=(PARAMS, RESTORED, None),
)
def entry(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    count = opt_state["count"] + 1
    mu, nu = (
        jax.device_put(opt_state["mu"], jax.memory.Space.Device),
        jax.device_put(opt_state["nu"], jax.memory.Space.Device),
    )
    mu = jax.tree.map(lambda m, g: B1 * m + (1 - B1) * g, mu, grads)
    nu = jax.tree.map(lambda v, g: B2 * v + (1 - B2) * g * g, nu, grads)
    step = count.astype(jnp.float32)
    mu_hat = jax.tree.map(lambda m: m / (1 - B1**step), mu)
    nu_hat = jax.tree.map(lambda v: v / (1 - B2**step), nu)
    params = jax.tree.map(lambda p, m, v: p - LR * m / (jnp.sqrt(v) + EPS), params, mu_hat, nu_hat)
    return params, {"count": count, "mu": mu, "nu": nu}, loss


def _values():
    params = {"w": np.linspace(-1, 1, 8, dtype=np.float32)[:, None], "b": np.zeros((1,), np.float32)}
    zeros = jax.tree.map(np.zeros_like, params)
    opt_state = {"count": np.zeros((), np.int32), "mu": zeros, "nu": zeros}
    x = np.arange(32, dtype=np.float32).reshape(4, 8) / 32
    y = np.ones((4, 1), np.float32)
    return params, opt_state, x, y


def abstract_args():
    return jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype), _values())


def concrete_args():
    params, opt_state, x, y = _values()
    return (
        jax.device_put(params, PARAMS),
        jax.device_put(opt_state, RESTORED),
        jax.device_put(x, ON_DEVICE),
        jax.device_put(y, ON_DEVICE),
    )
