"""Compile the MLP's train step with its weights streamed from host memory, then train.

    python -m examples.training.streamed_params [--no-stream]
"""

import argparse

import jax
import numpy as np

from .shardings import DEVICE, param_shardings
from .step import train_step, train_step_streaming_everything

LAYERS, WIDTH, BATCH = 3, 16, 8


def init_params(seed=0):
    rng = np.random.default_rng(seed)
    layers = [{"w": (rng.normal(size=(WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32),
               "b": np.zeros((WIDTH,), np.float32)} for _ in range(LAYERS)]
    return {"layers": layers, "head": (rng.normal(size=(WIDTH, 1)) / np.sqrt(WIDTH)).astype(np.float32)}


def make_batch(seed):
    rng = np.random.default_rng(100 + seed)
    x = rng.normal(size=(BATCH, WIDTH)).astype(np.float32)
    return {"x": x, "y": np.sin(x[:, :1])}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--stream", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args(argv)
    abstract = jax.eval_shape(init_params), jax.eval_shape(lambda: make_batch(0))
    params_sh = param_shardings(abstract[0], args.stream)
    # Compiled ahead of time from shapes, before the weights are loaded.
    biased = jax.jit(train_step, in_shardings=(params_sh, DEVICE), out_shardings=(params_sh, None))
    print("train_step compiled:", type(biased.lower(*abstract).compile()).__name__)
    streamed = jax.jit(train_step_streaming_everything, in_shardings=(params_sh, DEVICE),
                       out_shardings=(params_sh, None), donate_argnums=0)
    compiled = streamed.lower(*abstract).compile()
    params = jax.device_put(init_params(), params_sh)
    for seed in range(3):
        params, loss = compiled(params, jax.device_put(make_batch(seed), DEVICE))
    print(f"loss {float(loss):.4f}, weights in {params['head'].sharding.memory_kind}")


if __name__ == "__main__":
    main()
