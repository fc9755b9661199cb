"""Device memory for compute, pinned host memory for saved activations."""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((1,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
ACTIVATIONS = DEVICE.with_memory_kind("pinned_host")
