"""SGD with momentum kept in host memory, compiled ahead of time from shapes.

The momentum arrives from host memory (``in_shardings``) and the update computes with it, so
the new parameters, a device output, are computed from host memory: error 1200 on TPU, at
``.compile()``. The evaluation step, compiled the same way, returns a distance computed from a
snapshot in host memory: error 1200 again. The last line reads one element of the host
momentum eagerly, a slice in two dimensions that libtpu cannot copy out of a host buffer.
Every number it prints is exact in float32, on any backend.
"""

import jax
import jax.numpy as jnp

ON_DEVICE = jax.sharding.SingleDeviceSharding(jax.devices()[0])
ON_HOST = ON_DEVICE.with_memory_kind("pinned_host")
SHAPE = (32, 8)


def sgd_step(params, momentum, grads):
    momentum = 0.5 * momentum + grads
    return params - 0.25 * momentum, momentum


step = jax.jit(sgd_step, in_shardings=(ON_DEVICE, ON_HOST, ON_DEVICE), out_shardings=(ON_DEVICE, ON_HOST))


def distance(params, snapshot):
    return jnp.sum(jnp.abs(params - snapshot))


evaluate = jax.jit(distance, in_shardings=(ON_DEVICE, ON_HOST))


def main():
    shape = jax.ShapeDtypeStruct(SHAPE, jnp.float32)
    compiled_step = step.lower(shape, shape, shape).compile()
    compiled_evaluate = evaluate.lower(shape, shape).compile()
    params = jax.device_put(jnp.ones(SHAPE), ON_DEVICE)
    momentum = jax.device_put(jnp.zeros(SHAPE), ON_HOST)
    snapshot = jax.device_put(jnp.ones(SHAPE), ON_HOST)
    for i in range(4):
        grads = jax.device_put(jnp.full(SHAPE, float(i)), ON_DEVICE)
        params, momentum = compiled_step(params, momentum, grads)
        print(f"step {i}: params[0, 0] = {float(params[0, 0]):.4f}")
    print(f"distance from the snapshot: {float(compiled_evaluate(params, snapshot)):.4f}")
    print(f"momentum[16, 0] = {float(momentum[16, 0]):.4f}")


if __name__ == "__main__":
    main()
