"""Statistics of a host-offloaded parameter tree, read eagerly."""

import jax
import jax.numpy as jnp


def offload(tree):
    return jax.tree.map(lambda x: jax.device_put(x, jax.memory.Space.Host), tree)


def main():
    params = offload({"w": jnp.linspace(0.0, 1.0, 64).reshape(8, 8), "b": jnp.ones(8)})
    print("mean of w:", float(params["w"].mean()))
    print("mean of b:", float(jnp.mean(params["b"])))


if __name__ == "__main__":
    main()
