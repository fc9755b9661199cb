"""SGD with momentum over a train state whose momentum buffers are kept in host memory (the
model is large, the buffers are read once per step). The restored buffers arrive on host; the
step moves them to device, updates them and returns the whole state, whose momentum then comes
back in device memory."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import SingleDeviceSharding

HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


class TrainState(NamedTuple):
    params: dict
    momentum: dict


def predict(params, x):
    return jax.nn.relu(x @ params["dense"]) @ params["head"]


def train_step(state, batch):
    x, labels = batch
    grads = jax.grad(lambda p: jnp.mean((predict(p, x) - labels) ** 2))(state.params)
    momentum = jax.device_put(state.momentum, jax.memory.Space.Device)
    momentum = jax.tree.map(lambda m, g: 0.9 * m + g, momentum, grads)
    params = jax.tree.map(lambda p, m: p - 0.01 * m, state.params, momentum)
    return TrainState(params, momentum), jnp.mean(labels)


state_sharding = TrainState(params=None, momentum=HOST)
train = jax.jit(train_step, in_shardings=(state_sharding, None))  # expect: OFL1211 state

if __name__ == "__main__":
    params = {"dense": jnp.ones((128, 256)) * 0.01, "head": jnp.ones((256, 10)) * 0.01}
    momentum = jax.device_put(jax.tree.map(jnp.zeros_like, params), HOST)  # restored to host
    state, _ = train(TrainState(params, momentum), (jnp.ones((4, 128)), jnp.zeros((4, 10))))
    print(state.momentum["dense"].sharding.memory_kind)
