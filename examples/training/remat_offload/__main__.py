"""Compile and run the activation-offloading steps.

    python -m examples.training.remat_offload
"""

import jax
import jax.numpy as jnp
import numpy as np

from .shardings import ACTIVATIONS, DEVICE
from .stages import backward_stage, backward_stage_fetching, forward_stage, remat_step

WIDTH, BATCH, LAYERS = 8, 4, 3


def main():
    rng = np.random.default_rng(0)
    weights = [jnp.asarray(rng.normal(size=(WIDTH, WIDTH)) / np.sqrt(WIDTH), jnp.float32) for _ in range(LAYERS)]
    x = jnp.asarray(rng.normal(size=(BATCH, WIDTH)), jnp.float32)

    step = jax.jit(remat_step)
    for _ in range(2):
        weights, loss = step(weights, x)
    print(f"remat_step loss {float(loss):.4f}")

    forward = jax.jit(forward_stage, out_shardings=ACTIVATIONS)
    activation = forward(weights[0], x)
    ones = jnp.ones((BATCH, WIDTH))
    abstract = (jax.ShapeDtypeStruct((WIDTH, WIDTH), jnp.float32), jax.ShapeDtypeStruct((BATCH, WIDTH), jnp.float32),
                jax.ShapeDtypeStruct((BATCH, WIDTH), jnp.float32))
    broken = jax.jit(backward_stage, in_shardings=(DEVICE, ACTIVATIONS, DEVICE))
    print("backward_stage compiled:", type(broken.lower(*abstract).compile()).__name__)
    fetching = jax.jit(backward_stage_fetching, in_shardings=(DEVICE, ACTIVATIONS, DEVICE))
    print("input cotangent", fetching(weights[0], activation, ones).shape, "activation in",
          activation.sharding.memory_kind)


if __name__ == "__main__":
    main()
