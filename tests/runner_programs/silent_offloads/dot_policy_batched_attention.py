"""Attention scores and values computed with batched einsums under
``offload_dot_with_no_batch_dims``: every dot has a batch dimension, so the policy matches none."""

import jax
import jax.numpy as jnp

policy = jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host")


def attention(q, k, v):
    scores = jax.nn.softmax(jnp.einsum("bqd,bkd->bqk", q, k) / 8.0, axis=-1)
    return jnp.einsum("bqk,bkd->bqd", scores, v)


def loss(q, k, v):
    return jnp.sum(jax.checkpoint(attention, policy=policy)(q, k, v) ** 2)  # expect: OFL1211 -


grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))

if __name__ == "__main__":
    q = k = v = jnp.ones((4, 64, 128))
    print([float(g.sum()) for g in grad(q, k, v)])
