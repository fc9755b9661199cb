"""A MaxText-style training step for a TPU pod, compiled ahead of time (broken on TPU).

The step is what large-model training looks like: the layers are stacked and scanned over,
each rematerialised with a policy that offloads its MLP activations to host memory; the
parameters and the Adam moments live in host memory between steps (MaxText's
``parameter_memory_host_offload`` and ``optimizer_memory_host_offload``) and are moved to the
chips inside the step; everything is sharded over an ``fsdp`` x ``tensor`` mesh built from
``jax.devices()`` as MaxText builds it. As MaxText's ``train_compile.py`` does, ``main()``
compiles the step from abstract shapes before it makes any array, then trains.

The bug is one users meet: the step logs the norm of the parameters it was given, which are
the host copy (their abstract shapes say ``pinned_host``), so the norm is computed in host
memory and returned as a device output: XLA error 1200 on TPU, for any number of chips. On a laptop the program trains on the CPU
(``python examples/pod_train.py``); ``offload-fixer run --topology v5e-256
examples/pod_train.py`` compiles it for a 256-chip pod from the same laptop.

Under ``jax.distributed`` (``--num-processes N --process-id I --coordinator HOST:PORT``)
each process runs the same program over the devices of all of them.
"""

import argparse
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


@dataclasses.dataclass(frozen=True)
class Config:
    num_layers: int = 4
    emb_dim: int = 256
    mlp_dim: int = 512
    seq_len: int = 32
    per_device_batch_size: int = 2
    ici_fsdp_parallelism: int = -1
    """-1: whatever the devices leave after the other axes."""
    ici_tensor_parallelism: int = 4
    mesh_axes: tuple[str, ...] = ("fsdp", "tensor")
    learning_rate: float = 3e-3
    parameter_memory_host_offload: bool = True
    optimizer_memory_host_offload: bool = True


B1, B2, EPS = 0.9, 0.999, 1e-8
PARAM_SPECS = {"wi": P(None, "fsdp", "tensor"), "wo": P(None, "tensor", "fsdp")}
BATCH_SPEC = P(("fsdp", "tensor"))
REMAT_POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[],
    names_which_can_be_offloaded=["mlpwi"],
    offload_src="device",
    offload_dst="pinned_host",
)


def create_device_mesh(config, devices=None):
    """The mesh over every device, ``-1`` filled in, as MaxText's ``create_device_mesh``."""
    devices = jax.devices() if devices is None else devices
    tensor = math.gcd(config.ici_tensor_parallelism, len(devices))
    fsdp = len(devices) // tensor if config.ici_fsdp_parallelism == -1 else config.ici_fsdp_parallelism
    grid = mesh_utils.create_device_mesh((fsdp, tensor), devices, allow_split_physical_axes=True)
    return Mesh(grid, config.mesh_axes)


def state_shardings(config, mesh):
    """Parameters and moments where the config keeps them between steps."""
    params_kind = "pinned_host" if config.parameter_memory_host_offload else "device"
    moments_kind = "pinned_host" if config.optimizer_memory_host_offload else "device"

    def placed(kind):
        return {name: NamedSharding(mesh, spec, memory_kind=kind) for name, spec in PARAM_SPECS.items()}

    return {
        "step": NamedSharding(mesh, P()),
        "params": placed(params_kind),
        "mu": placed(moments_kind),
        "nu": placed(moments_kind),
    }


def init_params(key, config):
    wi_key, wo_key = jax.random.split(key)
    shape_in = (config.num_layers, config.emb_dim, config.mlp_dim)
    shape_out = (config.num_layers, config.mlp_dim, config.emb_dim)
    return {
        "wi": jax.random.normal(wi_key, shape_in) / math.sqrt(config.emb_dim),
        "wo": jax.random.normal(wo_key, shape_out) / math.sqrt(config.mlp_dim),
    }


def init_state(key):
    params = init_params(key, Config())
    zeros = jax.tree.map(jnp.zeros_like, params)
    return {"step": jnp.zeros((), jnp.int32), "params": params, "mu": zeros, "nu": zeros}


def get_abstract_state(config, mesh):
    """Shapes and shardings of the train state, no array made (MaxText's ``get_abstract_state``)."""
    shapes = jax.eval_shape(init_state, jax.random.key(0))
    return jax.tree.map(
        lambda shape, sharding: jax.ShapeDtypeStruct(shape.shape, shape.dtype, sharding=sharding),
        shapes,
        state_shardings(config, mesh),
    )


def get_shaped_batch(config, mesh):
    batch = config.per_device_batch_size * mesh.size
    sharding = NamedSharding(mesh, BATCH_SPEC)
    return {
        "inputs": jax.ShapeDtypeStruct((batch, config.seq_len, config.emb_dim), jnp.float32, sharding=sharding),
        "targets": jax.ShapeDtypeStruct((batch, config.seq_len, config.emb_dim), jnp.float32, sharding=sharding),
    }


def decoder_layer(x, layer):
    hidden = checkpoint_name(jnp.einsum("bsd,df->bsf", x, layer["wi"]), "mlpwi")
    return x + jnp.einsum("bsf,fd->bsd", jax.nn.gelu(hidden), layer["wo"]), None


def loss_fn(params, batch):
    layer = jax.checkpoint(decoder_layer, policy=REMAT_POLICY, prevent_cse=False)
    outputs, _ = jax.lax.scan(layer, batch["inputs"], params)
    return jnp.mean((outputs - batch["targets"]) ** 2)


def l2norm(tree):
    return jnp.sqrt(sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(tree)))


@jax.jit
def train_step(state, batch):
    config = Config()
    params = jax.device_put(state["params"], jax.memory.Space.Device)
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    mu = jax.device_put(state["mu"], jax.memory.Space.Device)
    nu = jax.device_put(state["nu"], jax.memory.Space.Device)
    step = state["step"] + 1
    mu = jax.tree.map(lambda m, g: B1 * m + (1 - B1) * g, mu, grads)
    nu = jax.tree.map(lambda v, g: B2 * v + (1 - B2) * g * g, nu, grads)
    scale = config.learning_rate * jnp.sqrt(1 - B2**step) / (1 - B1**step)
    params = jax.tree.map(lambda p, m, v: p - scale * m / (jnp.sqrt(v) + EPS), params, mu, nu)
    new_state = {
        "step": step,
        "params": jax.device_put(params, jax.memory.Space.Host),
        "mu": jax.device_put(mu, jax.memory.Space.Host),
        "nu": jax.device_put(nu, jax.memory.Space.Host),
    }
    metrics = {"loss": loss, "param_norm": l2norm(state["params"])}
    return new_state, metrics


def load_batch(config, step):
    """This process's part of the step's batch, as a multi-host input pipeline loads it."""
    rng = np.random.default_rng([step, jax.process_index()])
    shape = (config.per_device_batch_size * jax.local_device_count(), config.seq_len, config.emb_dim)
    inputs = rng.normal(size=shape).astype(np.float32)
    return {"inputs": inputs, "targets": np.tanh(inputs)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--coordinator", default=None, help="jax.distributed's coordinator, HOST:PORT")
    parser.add_argument("--num-processes", type=int, default=None)
    parser.add_argument("--process-id", type=int, default=None)
    args = parser.parse_args()
    if args.num_processes:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)

    config = Config()
    mesh = create_device_mesh(config)
    shardings = state_shardings(config, mesh)
    lowered = train_step.lower(get_abstract_state(config, mesh), get_shaped_batch(config, mesh))
    try:
        compiled = lowered.compile()
    except jax.errors.JaxRuntimeError as error:  # the pod's compiler said no: before any chip is booked
        raise SystemExit(f"train_step does not compile for {dict(mesh.shape)}: {error}") from None
    if jax.process_index() == 0:
        print(f"compiled for {dict(mesh.shape)} on {jax.device_count()} {jax.devices()[0].platform} devices")

    state = jax.jit(init_state, out_shardings=shardings)(jax.random.key(0))
    batch_sharding = NamedSharding(mesh, BATCH_SPEC)
    for step in range(args.steps):
        batch = jax.tree.map(
            lambda local: jax.make_array_from_process_local_data(batch_sharding, local), load_batch(config, step)
        )
        state, metrics = compiled(state, batch)
        if jax.process_index() == 0 and (step % 5 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  loss {float(metrics['loss']):.4f}  param_norm {float(metrics['param_norm']):.2f}")
    if jax.process_index() == 0:
        print("parameters live in:", state["params"]["wi"].sharding.memory_kind)


if __name__ == "__main__":
    main()
