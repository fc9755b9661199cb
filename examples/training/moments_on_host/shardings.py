"""Where each part of the training state lives: the mesh, and device or host memory."""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

MESH = jax.make_mesh((1,), ("data",))
REPLICATED = NamedSharding(MESH, P(), memory_kind="device")
ON_HOST = REPLICATED.with_memory_kind("pinned_host")


def state_shardings(offload_moments: bool):
    """Parameters and the step count on device; Adam's moments on host when offloaded."""
    moments = ON_HOST if offload_moments else REPLICATED
    return {
        "params": REPLICATED,
        "opt": {"count": REPLICATED, "mu": moments, "nu": moments},
    }


def batch_shardings():
    return {"x": REPLICATED, "y": REPLICATED}
