"""A replay buffer kept in host memory and refreshed by the host CPU: a function decorated with
compute_on's function form, one output per memory space (the buffer stays on host, its mean
reward goes to device and feeds the device loss). Nothing is computed on host outside it."""

import jax
import jax.numpy as jnp
from jax.experimental import compute_on as compute_on_api

host_compute = getattr(compute_on_api, "compute_on2", compute_on_api.compute_on)
ON_HOST = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


@host_compute(compute_type="device_host", out_memory_spaces=(jax.memory.Space.Host, jax.memory.Space.Device))
def refresh(buffer, rewards):
    buffer = jnp.concatenate([buffer[rewards.shape[0] :], rewards])
    return buffer, jnp.mean(buffer)


@jax.jit
def step(buffer, rewards, value):
    buffer, mean_reward = refresh(buffer, jax.device_put(rewards, ON_HOST))
    loss = jnp.mean((value - mean_reward) ** 2)
    return buffer, loss


if __name__ == "__main__":
    buffer = jax.device_put(jnp.zeros((64,)), ON_HOST)
    buffer, loss = step(buffer, jnp.ones((8,)), jnp.ones((4,)))
    print(buffer.sharding.memory_kind, loss.sharding.memory_kind)
