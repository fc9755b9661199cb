"""The scan example as it was first written: its trajectory, streamed to host memory by the
scan, is read with an eager strided slice (`trajectory[::40, 0]`), which no TPU compiler builds
from host memory (OFL1213); on a CPU it runs."""

import jax
import jax.numpy as jnp

N_MASSES, N_STEPS, DT = 16, 200, 0.05
STIFFNESS = 1.0


def forces(q):
    """Springs between neighbours, both ends fixed to walls."""
    padded = jnp.pad(q, 1)
    return STIFFNESS * (padded[:-2] - 2 * q + padded[2:])


def energy(q, p):
    padded = jnp.pad(q, 1)
    return 0.5 * jnp.sum(p**2) + 0.5 * STIFFNESS * jnp.sum(jnp.diff(padded) ** 2)


@jax.jit
def simulate(q, p):
    def leapfrog(state, _):
        q, p = state
        p = p + 0.5 * DT * forces(q)
        q = q + DT * p
        p = p + 0.5 * DT * forces(q)
        return (q, p), jax.device_put(q, jax.memory.Space.Host)

    (q, p), trajectory = jax.lax.scan(leapfrog, (q, p), None, length=N_STEPS)
    return q, p, trajectory


def initial_state():
    q = jnp.zeros(N_MASSES).at[N_MASSES // 2].set(1.0)
    return q, jnp.zeros(N_MASSES)


def main():
    q0, p0 = initial_state()
    q, p, trajectory = simulate(q0, p0)
    drift = abs(float(energy(q, p)) - float(energy(q0, p0))) / float(energy(q0, p0))
    print(f"simulated {trajectory.shape[0]} steps of {trajectory.shape[1]} masses")
    print("trajectory lives in:", trajectory.sharding.memory_kind)
    print(f"relative energy drift: {drift:.2e}")
    print(
        "displacement of the first mass over time:",
        [round(float(x), 3) for x in trajectory[::40, 0]],
    )


if __name__ == "__main__":
    main()
