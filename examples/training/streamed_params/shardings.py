"""Memory placement of the parameters: every leaf on host when streaming, else on device."""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((1,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = NamedSharding(MESH, P(), memory_kind="pinned_host")


def param_shardings(params, stream_from_host):
    return jax.tree.map(lambda _: HOST if stream_from_host else DEVICE, params)
