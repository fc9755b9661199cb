"""Train a linear model for a few steps with Adam's moments offloaded to host memory.

    python -m examples.training.moments_on_host [--no-offload]
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from . import optim
from .shardings import batch_shardings, state_shardings
from .step import train_step, train_step_moving_moments

FEATURES, BATCH = 8, 16


def init_state():
    params = {"w": jnp.zeros((FEATURES, 1)), "b": jnp.zeros((1,))}
    return {"params": params, "opt": optim.init(params)}


def make_batch(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(BATCH, FEATURES)).astype(np.float32)
    return {"x": x, "y": x @ np.linspace(-1, 1, FEATURES, dtype=np.float32)[:, None]}


def abstract_inputs():
    return jax.eval_shape(init_state), jax.eval_shape(lambda: make_batch(0))


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--offload", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    state_sh = state_shardings(args.offload)
    # Compiled ahead of time first, as large jobs check a step before training with it. The
    # first step leaves the state's shardings for JAX to infer: the new parameters come out
    # of host compute and are returned as device memory.
    inferred = jax.jit(train_step, in_shardings=(state_sh, batch_shardings()), donate_argnums=0)
    print("train_step compiled:", type(inferred.lower(*abstract_inputs()).compile()).__name__)
    declared = jax.jit(train_step_moving_moments, in_shardings=(state_sh, batch_shardings()),
                       out_shardings=(state_sh, None), donate_argnums=0)
    compiled = declared.lower(*abstract_inputs()).compile()
    state = jax.device_put(init_state(), state_sh)
    for seed in range(args.steps):
        state, loss = compiled(state, jax.device_put(make_batch(seed), batch_shardings()))
    print(f"train_step_moving_moments: loss {float(loss):.4f}, moments in {state['opt']['mu']['w'].sharding.memory_kind}")


if __name__ == "__main__":
    main()
