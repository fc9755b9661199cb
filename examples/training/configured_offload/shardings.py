"""Shardings chosen by the configuration's offload flags."""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((1,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = NamedSharding(MESH, P(), memory_kind="pinned_host")


def state_shardings(config):
    params = DEVICE
    if config.offload_params:
        params = HOST
    if config.offload_opt_state:
        velocity = HOST
    else:
        velocity = DEVICE
    return {"params": params, "velocity": velocity}
