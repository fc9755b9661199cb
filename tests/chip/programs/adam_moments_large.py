"""Adam whose moments live in host memory between steps, at a size where they matter: a 30720 x
30720 and a 30720 x 256 float32 matrix (3.8 GB and 31 MB), batch 512. The step does the Adam
arithmetic on the moments where ``in_shardings`` put them (``main()`` lowers it from shapes, as
JAX 0.10.2 types them device arrays then), so their update is host compute (OFL1201), and
libtpu needs 24.87 GB of temporaries for it. Moving the moments to device in the step, the fix a
plan makes, needs 17.78 GB; the chip has 15.75 GB. The same step without offload runs there in
11.6 GB (``CHIP_VARIANTS``).

``main()`` only lowers the step (what the tool checks, on any machine); ``example()`` runs it
(on the chip, by ``scripts/chip_corpus.py``).
"""

import functools
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

INTENDED_HOST_OUTPUTS = ("[1]['mu']['b']", "[1]['mu']['w']", "[1]['nu']['b']", "[1]['nu']['w']")
CHIP_VARIANTS = {"no_offload": {"ADAM_OFFLOAD": "0"}}
"""The same model with its moments on device, run on the chip too: what the offload saves."""

N = int(os.environ.get("ADAM_N", "30720"))
BATCH, OUT = 512, 256
OFFLOAD = os.environ.get("ADAM_OFFLOAD", "1") == "1"
DEVICE = jax.sharding.SingleDeviceSharding(jax.devices()[0])
HOST = DEVICE.with_memory_kind("pinned_host") if OFFLOAD else DEVICE
PARAMS = {"b": DEVICE, "w": DEVICE}
MOMENTS = {"b": HOST, "w": HOST}
STATE = {"mu": MOMENTS, "nu": MOMENTS}
STEP_MS = None
"""The median time of a step, once ``example()`` has run (the state is too large to copy)."""


def loss_fn(params, x, y):
    return jnp.mean((jnp.tanh(x @ params["w"]) @ params["b"] - y) ** 2)


@functools.partial(
    jax.jit,
    in_shardings=(PARAMS, STATE, DEVICE, DEVICE),
    out_shardings=(PARAMS, STATE, DEVICE),
    donate_argnums=(0, 1),
)
def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, opt_state["mu"], grads)
    nu = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, opt_state["nu"], grads)
    params = jax.tree.map(lambda p, m, v: p - 1e-3 * m / (jnp.sqrt(v) + 1e-8), params, mu, nu)
    return params, {"mu": mu, "nu": nu}, loss


def shapes():
    params = {"b": jax.ShapeDtypeStruct((N, OUT), jnp.float32), "w": jax.ShapeDtypeStruct((N, N), jnp.float32)}
    batch = (jax.ShapeDtypeStruct((BATCH, N), jnp.float32), jax.ShapeDtypeStruct((BATCH, OUT), jnp.float32))
    return params, {"mu": params, "nu": params}, *batch


def example(steps=6):
    global STEP_MS
    params = {
        "b": jax.device_put(jnp.full((N, OUT), 0.01, jnp.float32), DEVICE),
        "w": jax.device_put(jnp.full((N, N), 1.0 / N, jnp.float32), DEVICE),
    }
    moments = {k: jax.device_put(jnp.zeros_like(v), HOST) for k, v in params.items()}
    state = {"mu": moments, "nu": {k: jax.device_put(jnp.zeros_like(v), HOST) for k, v in params.items()}}
    x = jax.device_put(jnp.ones((BATCH, N), jnp.float32) / N, DEVICE)
    y = jax.device_put(jnp.ones((BATCH, OUT), jnp.float32), DEVICE)
    times, loss = [], None
    for _ in range(steps):
        start = time.perf_counter()
        params, state, loss = train_step(params, state, x, y)
        jax.block_until_ready(loss)
        times.append(time.perf_counter() - start)
    STEP_MS = 1000 * float(np.median(times[1:]))
    return loss, params["b"], state["mu"]["b"]


def main():
    print(train_step.lower(*shapes()) is not None)


if __name__ == "__main__":
    main()
