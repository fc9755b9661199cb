"""A simulation that streams its trajectory to host memory, then reads it back three ways.

``simulate`` moves each step's state to host memory in the scan body (a host array comes out:
fine). ``snapshot`` keeps a copy of the final state as ``unpinned_host``, which JAX before
0.4.25 spelled for host memory: JAX 0.10 types it device memory but XLA moves it to host, so
the snapshot, a device output, is host memory: error 1200 on TPU. ``summarize``, compiled
ahead of time, averages the trajectory it receives in host memory (``in_shardings``): host
compute returned as a device output, error 1200 again. The last line takes every tenth step
of the host trajectory eagerly, a strided slice that libtpu cannot copy out of a host buffer.
Every number it prints is exact in float32, on any backend.
"""

import jax
import jax.numpy as jnp

ON_DEVICE = jax.sharding.SingleDeviceSharding(jax.devices()[0])
ON_HOST = ON_DEVICE.with_memory_kind("pinned_host")
SNAPSHOT = ON_DEVICE.with_memory_kind("unpinned_host")
STEPS, WIDTH = 40, 8


@jax.jit
def simulate(state):
    def advance(state, _):
        state = state + 1.0
        return state, jax.device_put(state, jax.memory.Space.Host)

    return jax.lax.scan(advance, state, None, length=STEPS)


@jax.jit
def snapshot(state):
    return jax.device_put(state * 2.0, SNAPSHOT)


def mean_over_steps(trajectory):
    return jnp.mean(trajectory, axis=0)


summarize = jax.jit(mean_over_steps, in_shardings=ON_HOST)


def main():
    final, trajectory = simulate(jnp.zeros(WIDTH))
    print(f"trajectory: {trajectory.shape} in {trajectory.sharding.memory_kind}, final {float(final[0]):.1f}")
    saved = snapshot(final)
    print(f"snapshot[0] = {float(saved[0]):.1f}")
    compiled = summarize.lower(jax.ShapeDtypeStruct((STEPS, WIDTH), jnp.float32)).compile()
    print(f"mean of the first column: {float(compiled(trajectory)[0]):.2f}")
    print("every tenth step:", [float(x) for x in trajectory[::10, 0]])


if __name__ == "__main__":
    main()
