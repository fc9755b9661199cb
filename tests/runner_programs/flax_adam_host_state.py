"""A flax MLP trained with optax's Adam, its optimizer state streamed from host memory.

The step is jitted with the optimizer state's shardings in host memory (``pinned_host``), as
one does to keep Adam's two moments off the accelerator, and returns the new state through
device outputs: on TPU the state's leaves reach outputs whose memory kind is device (XLA error
1200), and the Adam arithmetic runs on the host CPU on the way.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

FEATURES, HIDDEN, BATCH, STEPS = 8, 32, 64, 30


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(HIDDEN)(x))
        return nn.Dense(1)(x)


model = MLP()
optimizer = optax.adam(1e-2)
ON_DEVICE = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="device")
ON_HOST = ON_DEVICE.with_memory_kind("pinned_host")


def loss_fn(params, x, y):
    return jnp.mean((model.apply(params, x) - y) ** 2)


def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


step = jax.jit(train_step, in_shardings=(ON_DEVICE, ON_HOST, ON_DEVICE, ON_DEVICE))


def main():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH, FEATURES)).astype(np.float32)
    y = x @ np.linspace(-1.0, 1.0, FEATURES, dtype=np.float32)[:, None]
    params = model.init(jax.random.key(0), x)
    opt_state = optimizer.init(params)
    # compiled for shapes, before the state is placed: what a trainer does ahead of time
    compiled = step.lower(*jax.eval_shape(lambda: (params, opt_state, x, y))).compile()
    for i in range(STEPS):
        opt_state = jax.device_put(opt_state, ON_HOST)  # the state waits on host between steps
        params, opt_state, loss = compiled(params, opt_state, x, y)
        if i % 10 == 0 or i == STEPS - 1:
            print(f"step {i:3d}  loss {float(loss):.4f}")


if __name__ == "__main__":
    main()
