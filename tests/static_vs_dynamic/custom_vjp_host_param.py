"""A custom_vjp layer (a clipped-gradient scale) applied to a host-streamed parameter."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((8,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")


@jax.custom_vjp
def clip_scale(w, x):
    return w * x


def clip_scale_fwd(w, x):
    return w * x, (w, x)


def clip_scale_bwd(res, g):
    w, x = res
    return jnp.clip(g * x, -1, 1), g * w


clip_scale.defvjp(clip_scale_fwd, clip_scale_bwd)


def step(w, x):
    return clip_scale(w, x)


run = jax.jit(step, in_shardings=(HOST, DEVICE))


if __name__ == "__main__":
    print(run(np.ones((8,), np.float32), np.ones((8,), np.float32)))
