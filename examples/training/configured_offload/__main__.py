"""Train with the default configuration (optimizer state offloaded to host memory).

    python -m examples.training.configured_offload
"""

import jax
import jax.numpy as jnp
import numpy as np

from .config import TrainConfig
from .shardings import DEVICE, state_shardings
from .step import make_eval_step, make_train_step

FEATURES, BATCH = 4, 8


def init_state():
    zeros = {"w": jnp.zeros((FEATURES, 1))}
    return {"params": zeros, "velocity": zeros}


def main():
    config = TrainConfig()
    state_sh = state_shardings(config)
    step = jax.jit(make_train_step(config), in_shardings=(state_sh, DEVICE), out_shardings=(state_sh, None),
                   donate_argnums=0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH, FEATURES)).astype(np.float32)
    batch = jax.device_put({"x": x, "y": x @ np.ones((FEATURES, 1), np.float32)}, DEVICE)
    state = jax.device_put(init_state(), state_sh)
    for _ in range(3):
        state, loss = step(state, batch)
    print(f"loss {float(loss):.4f}, velocity in {state['velocity']['w'].sharding.memory_kind}")
    evaluate = jax.jit(make_eval_step(config), in_shardings=(state_sh, DEVICE))
    # compiled from shapes alone, as an evaluation job does before any state is loaded
    abstract = jax.eval_shape(init_state), jax.ShapeDtypeStruct(x.shape, x.dtype)
    batch_shapes = {"x": abstract[1], "y": jax.ShapeDtypeStruct((BATCH, 1), jnp.float32)}
    print("eval_step compiled:", type(evaluate.lower(abstract[0], batch_shapes).compile()).__name__)


if __name__ == "__main__":
    main()
