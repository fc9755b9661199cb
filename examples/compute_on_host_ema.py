"""Host compute: an exponential moving average of the weights, kept and updated on the host.

Training keeps an EMA (Polyak average) of the parameters, a full extra copy of the model
that is only read at evaluation time. Here it lives in ``pinned_host`` memory and is
updated by the host CPU inside the jitted step with ``jax.experimental.compute_on``
(``compute_type="device_host"``): the fresh parameters are moved to host, blended into the
average there, and the average is returned as a host array.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import compute_on as compute_on_api
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

FEATURES, BATCH, STEPS = 8, 32, 60
LEARNING_RATE, EMA_DECAY = 0.1, 0.9

MESH = Mesh(jax.devices(), ("data",))
ON_HOST = NamedSharding(MESH, P(), memory_kind="pinned_host")

# The function form of compute_on: `compute_on` itself from JAX 0.11.1, `compute_on2` (beside
# the older context manager) from 0.10.1 to 0.11.0.
host_compute = getattr(compute_on_api, "compute_on2", compute_on_api.compute_on)


def loss_fn(params, batch):
    prediction = batch["x"] @ params["w"] + params["b"]
    return jnp.mean((prediction - batch["y"]) ** 2)


def blend_into_average(ema, params):
    return jax.tree.map(lambda e, p: EMA_DECAY * e + (1 - EMA_DECAY) * p, ema, params)


blend_on_host = host_compute(
    blend_into_average, compute_type="device_host", out_memory_spaces=jax.memory.Space.Host
)


@functools.partial(jax.jit, donate_argnums=(0, 1))
def train_step(params, ema, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    params = jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    params_on_host = jax.device_put(params, ON_HOST)
    ema = blend_on_host(ema, params_on_host)
    return params, ema, loss


eval_loss = jax.jit(loss_fn)


def init_params():
    return {"w": jnp.zeros((FEATURES, 1)), "b": jnp.zeros((1,))}


def make_batch(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(BATCH, FEATURES)).astype(np.float32)
    true_w = np.linspace(-1.0, 1.0, FEATURES, dtype=np.float32)[:, None]
    noise = rng.normal(scale=0.5, size=(BATCH, 1)).astype(np.float32)
    return {"x": jnp.asarray(x), "y": jnp.asarray(x @ true_w + 0.5 + noise)}


def main():
    params = init_params()
    ema = jax.device_put(init_params(), ON_HOST)
    for step in range(STEPS):
        params, ema, loss = train_step(params, ema, make_batch(step))
        if step % 20 == 0 or step == STEPS - 1:
            print(f"step {step:3d}  loss {float(loss):.4f}")
    held_out = make_batch(10_000)
    print("EMA lives in:", ema["w"].sharding.memory_kind)
    print(f"held-out loss  last weights {float(eval_loss(params, held_out)):.4f}", end="  ")
    print(
        f"EMA weights {float(eval_loss(jax.device_put(ema, jax.memory.Space.Device), held_out)):.4f}"
    )


if __name__ == "__main__":
    main()
