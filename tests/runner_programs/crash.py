"""Compiles one clean function, then fails the way user programs do."""

import sys

import jax
import jax.numpy as jnp


@jax.jit
def total(x):
    return jnp.sum(x)


@jax.jit
def mismatched(x):
    return x @ jnp.ones((5, 5))


def main(argv):
    print("total", float(total(jnp.arange(4.0))))
    if argv == ["--exit", "4"]:
        sys.exit(4)
    mismatched(jnp.ones(3))  # expect-crash


if __name__ == "__main__":
    main(sys.argv[1:])
