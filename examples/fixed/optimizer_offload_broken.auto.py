"""Adam with host-resident moments that never come back to the device (broken on TPU).

The same training program as ``optimizer_offload.py``, except that the train step trusts
``in_shardings``/``out_shardings`` to move the moments: it does the Adam arithmetic on them
directly. Compiled from ``ShapeDtypeStruct``s, JAX types the moments as device arrays, so
this traces and runs on CPU; on TPU the moments arrive in host memory, the update of the
parameters is computed from host values, and the parameters are returned through outputs
whose memory kind is device: XLA error 1200.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

LEARNING_RATE = 0.1
B1, B2, EPS = 0.9, 0.999, 1e-8
FEATURES, BATCH, STEPS = 8, 32, 40

MESH = Mesh(jax.devices(), ("data",))
ON_DEVICE = NamedSharding(MESH, P(), memory_kind="device")
ON_HOST = ON_DEVICE.with_memory_kind("pinned_host")
PARAM_SHARDINGS = {"w": ON_DEVICE, "b": ON_DEVICE}
MOMENT_SHARDINGS = {"w": ON_HOST, "b": ON_HOST}
OPT_SHARDINGS = {"count": ON_DEVICE, "mu": MOMENT_SHARDINGS, "nu": MOMENT_SHARDINGS}
BATCH_SHARDINGS = {"x": ON_DEVICE, "y": ON_DEVICE}


def loss_fn(params, batch):
    prediction = batch["x"] @ params["w"] + params["b"]
    return jnp.mean((prediction - batch["y"]) ** 2)


def adam_update(params, grads, count, mu, nu):
    mu = jax.tree.map(lambda m, g: B1 * m + (1 - B1) * g, mu, grads)
    nu = jax.tree.map(lambda v, g: B2 * v + (1 - B2) * g * g, nu, grads)
    mu_scale = 1 / (1 - B1**count)
    nu_scale = 1 / (1 - B2**count)
    params = jax.tree.map(
        lambda p, m, v: p - LEARNING_RATE * (m * mu_scale) / (jnp.sqrt(v * nu_scale) + EPS),
        params,
        mu,
        nu,
    )
    return params, mu, nu


@functools.partial(
    jax.jit,
    in_shardings=(PARAM_SHARDINGS, OPT_SHARDINGS, BATCH_SHARDINGS),
    out_shardings=(None, OPT_SHARDINGS, None),
    donate_argnums=(0, 1),
)
def train_step(params, opt_state, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    count = opt_state["count"] + 1
    mu = jax.device_put(opt_state["mu"], jax.memory.Space.Device)
    nu = jax.device_put(opt_state["nu"], jax.memory.Space.Device)
    params, mu, nu = adam_update(
        params, grads, count.astype(jnp.float32), mu, nu
    )
    opt_state = {"count": count, "mu": mu, "nu": nu}
    return params, opt_state, loss


def init_params():
    return {"w": jnp.zeros((FEATURES, 1)), "b": jnp.zeros((1,))}


def init_opt_state(params):
    zeros = jax.tree.map(jnp.zeros_like, params)
    return {"count": jnp.zeros((), jnp.int32), "mu": zeros, "nu": zeros}


def make_batch(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(BATCH, FEATURES)).astype(np.float32)
    true_w = np.linspace(-1.0, 1.0, FEATURES, dtype=np.float32)[:, None]
    return {"x": x, "y": x @ true_w + 0.5}


def abstract_inputs():
    """Shapes and dtypes only: what the step is compiled for before any array exists."""
    params = jax.eval_shape(init_params)
    return params, jax.eval_shape(init_opt_state, params), jax.eval_shape(lambda: make_batch(0))


def main():
    compiled = train_step.lower(*abstract_inputs()).compile()
    params = jax.device_put(init_params(), PARAM_SHARDINGS)
    opt_state = jax.device_put(init_opt_state(init_params()), OPT_SHARDINGS)
    for step in range(STEPS):
        batch = jax.device_put(make_batch(step), BATCH_SHARDINGS)
        params, opt_state, loss = compiled(params, opt_state, batch)
        if step % 10 == 0 or step == STEPS - 1:
            print(f"step {step:3d}  loss {float(loss):.4f}")
    print("moments live in:", opt_state["mu"]["w"].sharding.memory_kind)


if __name__ == "__main__":
    main()
