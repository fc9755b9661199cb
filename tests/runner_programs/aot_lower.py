"""A train step compiled ahead of time from ShapeDtypeStructs, as large training codebases do.

The weights stream in from ``pinned_host`` (``in_shardings``) and the loss is computed from them
without a move to device: the loss output is error 1200 on TPU. Needs a backend with
``pinned_host`` memory.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MESH = Mesh(jax.devices(), ("data",))
ON_DEVICE = NamedSharding(MESH, PartitionSpec(), memory_kind="device")
ON_HOST = ON_DEVICE.with_memory_kind("pinned_host")


def loss_fn(params, x):
    return jnp.mean((x @ params["w"] + params["b"]) ** 2)


@functools.partial(
    jax.jit,
    in_shardings=(ON_HOST, ON_DEVICE),  # expect: OFL1200 [1]
    out_shardings=(ON_HOST, None),
    donate_argnums=0,
)
def train_step(params, x):
    loss, grads = jax.value_and_grad(loss_fn)(params, x)
    params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    return params, loss


def init_params():
    return {"w": np.full((4, 1), 0.5, np.float32), "b": np.zeros((1,), np.float32)}


def main():
    abstract = (jax.eval_shape(init_params), jax.ShapeDtypeStruct((8, 4), jnp.float32))
    train_step.eval_shape(*abstract)  # shapes only: nothing is compiled
    compiled = train_step.lower(*abstract).compile()
    params = jax.device_put(init_params(), ON_HOST)
    params, loss = compiled(
        params, jax.device_put(np.ones((8, 4), np.float32), ON_DEVICE)
    )
    print("loss", float(loss))


if __name__ == "__main__":
    main()
