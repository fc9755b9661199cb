"""Parameter streaming that never moves the weights to the device (broken on TPU).

The same MLP as ``param_streaming.py``: weights kept in ``pinned_host`` memory, train step
compiled ahead of time from ``ShapeDtypeStruct``s with host ``in_shardings``. This version
expects ``in_shardings`` to stream the weights in by itself and computes on them directly.
JAX types an abstract argument as a device array even when ``in_shardings`` puts it on the
host (JAX >= 0.7.1), so this traces and runs on CPU. On TPU the weights arrive in host
memory, the whole forward pass becomes host compute, and the loss, a device output, is
computed from host values: XLA error 1200.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

N_LAYERS, WIDTH, BATCH, STEPS = 3, 16, 32, 30
LEARNING_RATE = 0.1

MESH = Mesh(jax.devices(), ("data",))
ON_DEVICE = NamedSharding(MESH, P(), memory_kind="device")
ON_HOST = ON_DEVICE.with_memory_kind("pinned_host")


def forward(params, x):
    def layer(h, w):
        return jnp.tanh(h @ w), None

    h, _ = jax.lax.scan(layer, x, params["layers"])
    return h @ params["head"]


def loss_fn(params, batch):
    return jnp.mean((forward(params, batch["x"]) - batch["y"]) ** 2)


@functools.partial(
    jax.jit,
    in_shardings=(ON_HOST, ON_DEVICE),
    out_shardings=(ON_HOST, None),
    donate_argnums=0,
)
def train_step(params, batch):
    params = jax.device_put(params, jax.memory.Space.Device)
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    params = jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return params, loss


def init_params(seed=0):
    rng = np.random.default_rng(seed)
    layers = rng.normal(size=(N_LAYERS, WIDTH, WIDTH)) / np.sqrt(WIDTH)
    head = rng.normal(size=(WIDTH, 1)) / np.sqrt(WIDTH)
    return {"layers": layers.astype(np.float32), "head": head.astype(np.float32)}


def make_batch(seed):
    rng = np.random.default_rng(100 + seed)
    x = rng.normal(size=(BATCH, WIDTH)).astype(np.float32)
    return {"x": x, "y": np.sin(x[:, :1]) + 0.1 * x[:, 1:2]}


def abstract_inputs():
    """Shapes and dtypes only: the step is compiled before the weights are loaded."""
    return jax.eval_shape(init_params), jax.eval_shape(lambda: make_batch(0))


def main():
    compiled = train_step.lower(*abstract_inputs()).compile()
    params = jax.device_put(init_params(), ON_HOST)
    for step in range(STEPS):
        params, loss = compiled(params, jax.device_put(make_batch(step % 4), ON_DEVICE))
        if step % 10 == 0 or step == STEPS - 1:
            print(f"step {step:3d}  loss {float(loss):.4f}")
    print("weights live in:", params["layers"].sharding.memory_kind)


if __name__ == "__main__":
    main()
