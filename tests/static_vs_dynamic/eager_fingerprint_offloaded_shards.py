"""The pattern of tunix's fix "Fingerprint optimizer updates before host offload": the optimizer
state is moved to pinned_host, then each shard is sampled for a fingerprint. The data of one
addressable shard is typed device memory: the eager reshape of it is error 1200 on TPU."""

import hashlib
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def put_memory_kind(tree, memory_kind):
    def move(value):
        if not isinstance(value, jax.Array):
            return value
        if value.sharding.memory_kind == memory_kind:
            return value
        return jax.device_put(value, value.sharding.with_memory_kind(memory_kind))

    return jax.block_until_ready(jax.tree.map(move, tree))


def sample_sha256(tree, samples=8):
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(tree):
        for shard in leaf.addressable_shards:
            sample = np.asarray(jax.device_get(shard.data.reshape(-1)[:samples]))
            digest.update(sample.tobytes())
    return digest.hexdigest()


def main():
    mesh = jax.make_mesh((2, 2), ("dp", "tp"), devices=jax.devices()[:4])
    sharding = NamedSharding(mesh, P("dp", "tp"))
    state = {"mu": jax.device_put(jnp.ones((8, 8)), sharding), "nu": jax.device_put(jnp.zeros((8, 8)), sharding)}
    state = put_memory_kind(state, "pinned_host")
    print(sample_sha256(state))


if __name__ == "__main__":
    main()
