"""``offload_dot_with_no_batch_dims`` given device memory as both source and destination."""

import jax
import jax.numpy as jnp

policy = jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "device")


def mlp(w1, w2, x):
    return jnp.sum(jax.nn.relu(x @ w1) @ w2)


@jax.jit
def grads(w1, w2, x):
    return jax.grad(jax.checkpoint(mlp, policy=policy), argnums=(0, 1))(w1, w2, x)  # expect: OFL1211 -


if __name__ == "__main__":
    g1, g2 = grads(jnp.ones((128, 256)) * 0.01, jnp.ones((256, 128)) * 0.01, jnp.ones((8, 128)))
    print(float(g1.sum()), float(g2.sum()))
