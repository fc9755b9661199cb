"""A rollout buffer kept in host memory, read by jitted functions and eagerly, as RL code does.

``every_eighth`` takes every eighth row of the host buffer and moves it to device: a strided
slice of a host value, which libtpu cannot copy (its first call fails on TPU). ``row_sums``
reduces the buffer on device after moving it there, as it should: it compiles. The last line
reads one element eagerly, a slice in two dimensions of a host buffer, which libtpu cannot
copy either. Every number it prints is exact in float32, on any backend.
"""

import jax
import jax.numpy as jnp

ON_HOST = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


@jax.jit
def every_eighth(buffer):
    return jax.device_put(buffer[::8], jax.memory.Space.Device)


@jax.jit
def row_sums(buffer):
    return jnp.sum(jax.device_put(buffer, jax.memory.Space.Device), axis=1)


def main():
    buffer = jax.device_put(jnp.arange(256.0).reshape(64, 4), ON_HOST)
    print("every eighth row starts with:", [float(x) for x in every_eighth(buffer)[:, 0]])
    print("sum of the row sums:", float(jnp.sum(row_sums(buffer))))
    print("buffer[5, 1] =", float(buffer[5, 1]))


if __name__ == "__main__":
    main()
