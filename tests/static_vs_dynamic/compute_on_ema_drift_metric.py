"""An EMA of the weights blended on the host by compute_on's function form, then a drift
metric computed from the host EMA outside the host function: host compute (OFL1201)."""

import jax
import jax.numpy as jnp
from jax.experimental import compute_on as compute_on_api

# The function form: `compute_on2` from JAX 0.10.1 to 0.11.0, `compute_on` itself from 0.11.1.
host_compute = getattr(compute_on_api, "compute_on2", compute_on_api.compute_on)
ON_HOST = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


def blend(ema, params):
    return jax.tree.map(lambda e, p: 0.99 * e + 0.01 * p, ema, params)


blend_on_host = host_compute(blend, compute_type="device_host", out_memory_spaces=jax.memory.Space.Host)


@jax.jit
def train_step(params, ema, x):
    grads = jax.grad(lambda p: jnp.mean((x @ p["w"]) ** 2))(params)
    params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    ema = blend_on_host(ema, jax.device_put(params, ON_HOST))
    drift = ema["w"] - 1.0
    return params, ema, drift


if __name__ == "__main__":
    params = {"w": jnp.ones((8, 8))}
    ema = jax.device_put(params, ON_HOST)
    params, ema, drift = train_step(params, ema, jnp.ones((4, 8)))
    print(ema["w"].sharding.memory_kind, drift.sharding.memory_kind)
