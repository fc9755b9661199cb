"""Uses an operation only the CPU backend implements: the program works, the check cannot."""

import jax
import jax.numpy as jnp


@jax.jit
def eigenvalues(matrix):
    return jnp.linalg.eig(matrix)[0]


@jax.jit
def trace_of(matrix):
    return jnp.trace(matrix)


if __name__ == "__main__":
    matrix = jnp.diag(jnp.arange(1.0, 4.0))
    print("eigenvalues", sorted(float(v.real) for v in eigenvalues(matrix)))
    print("trace", float(trace_of(matrix)))
