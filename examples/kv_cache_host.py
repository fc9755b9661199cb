"""Greedy decoding with the attention KV cache kept in host memory.

A one-layer, single-head transformer with fixed random weights generates tokens one at a
time. The key/value cache for the whole context lives in ``pinned_host`` memory: each
decode step writes the new key and value straight into the host cache (a move to host
feeding a dynamic-update-slice) and brings the cache to the device only to attend over it.
The result is checked against recomputing attention over the full sequence without a cache.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

VOCAB, D_MODEL, MAX_LEN, PROMPT, NEW_TOKENS = 32, 16, 16, (3, 14, 15, 9), 8

MESH = Mesh(jax.devices(), ("data",))
ON_DEVICE = NamedSharding(MESH, P(), memory_kind="device")
ON_HOST = ON_DEVICE.with_memory_kind("pinned_host")


def init_params(seed=0):
    rng = np.random.default_rng(seed)

    def dense(n_in, n_out):
        return jnp.asarray(rng.normal(size=(n_in, n_out)) / np.sqrt(n_in), jnp.float32)

    return {
        "embed": dense(VOCAB, D_MODEL) * 4,
        "wq": dense(D_MODEL, D_MODEL),
        "wk": dense(D_MODEL, D_MODEL),
        "wv": dense(D_MODEL, D_MODEL),
        "wo": dense(D_MODEL, D_MODEL),
        "unembed": dense(D_MODEL, VOCAB),
    }


def init_cache():
    zeros = jnp.zeros((MAX_LEN, D_MODEL), jnp.float32)
    return jax.device_put({"k": zeros, "v": zeros}, ON_HOST)


def attend(params, x, keys, values, mask):
    scores = jnp.where(mask, keys @ (x @ params["wq"]) / np.sqrt(D_MODEL), -jnp.inf)
    mixed = jax.nn.softmax(scores) @ values
    return (x + mixed @ params["wo"]) @ params["unembed"]


@functools.partial(jax.jit, donate_argnums=1)
def decode_step(params, cache, token, pos):
    x = params["embed"][token]
    new_k = jax.device_put((x @ params["wk"])[None], ON_HOST)
    new_v = jax.device_put((x @ params["wv"])[None], ON_HOST)
    cache = {
        "k": jax.lax.dynamic_update_slice(cache["k"], new_k, (pos, 0)),
        "v": jax.lax.dynamic_update_slice(cache["v"], new_v, (pos, 0)),
    }
    keys = jax.device_put(cache["k"], ON_DEVICE)
    values = jax.device_put(cache["v"], ON_DEVICE)
    logits = attend(params, x, keys, values, jnp.arange(MAX_LEN) <= pos)
    return logits, cache


@jax.jit
def full_recompute_logits(params, tokens):
    """Reference without a cache: causal attention over the whole sequence at once."""
    x = params["embed"][tokens]
    keys, values = x @ params["wk"], x @ params["wv"]
    positions = jnp.arange(tokens.shape[0])
    causal = positions[None, :] <= positions[:, None]
    return jax.vmap(lambda xi, mask: attend(params, xi, keys, values, mask))(x, causal)


def generate(params):
    cache = init_cache()
    tokens = list(PROMPT)
    for pos in range(len(PROMPT) + NEW_TOKENS - 1):
        logits, cache = decode_step(params, cache, tokens[pos], pos)
        if pos >= len(PROMPT) - 1:
            tokens.append(int(jnp.argmax(logits)))
    return tokens, cache


def main():
    params = init_params()
    tokens, cache = generate(params)
    reference = jnp.argmax(full_recompute_logits(params, jnp.asarray(tokens[:-1])), axis=-1)
    print("prompt:   ", list(PROMPT))
    print("generated:", tokens[len(PROMPT) :])
    print("cache lives in:", cache["k"].sharding.memory_kind)
    print(
        "matches full recompute:",
        [int(t) for t in reference[len(PROMPT) - 1 :]] == tokens[len(PROMPT) :],
    )


if __name__ == "__main__":
    main()
