"""An Adam step whose moments were restored from a checkpoint into host memory, to keep them
out of device memory between steps. The step moves them to device to update them and returns
the new moments without saying where: JAX returns them in device memory, so from the second
step on the "offloaded" state lives on device."""

import jax
import jax.numpy as jnp
from jax.sharding import SingleDeviceSharding

HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")
DEVICE = SingleDeviceSharding(jax.devices()[0])


def loss(params, x, y):
    return jnp.mean((jnp.tanh(x @ params["w"]) + params["b"] - y) ** 2)


def adam_step(params, opt_state, x, y):
    grads = jax.grad(loss)(params, x, y)
    moments = jax.device_put(opt_state, jax.memory.Space.Device)
    mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, moments["mu"], grads)
    nu = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, moments["nu"], grads)
    params = jax.tree.map(lambda p, m, v: p - 1e-3 * m / (jnp.sqrt(v) + 1e-8), params, mu, nu)
    return params, {"mu": mu, "nu": nu}


step = jax.jit(adam_step, in_shardings=(DEVICE, HOST, DEVICE, DEVICE))  # expect: OFL1211 opt_state

if __name__ == "__main__":
    params = {"w": jnp.ones((64, 32)) * 0.01, "b": jnp.zeros(32)}
    zeros = jax.tree.map(jnp.zeros_like, params)
    opt_state = jax.device_put({"mu": zeros, "nu": zeros}, HOST)  # restored to host memory
    params, opt_state = step(params, opt_state, jnp.ones((8, 64)), jnp.zeros((8, 32)))
    print(opt_state["mu"]["w"].sharding.memory_kind, float(params["w"].sum()))
