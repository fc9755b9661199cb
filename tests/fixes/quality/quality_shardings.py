"""Sharding trees the corpus programs import: built by functions, as a training package does."""

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def make_mesh(devices=4):
    return Mesh(np.array(jax.devices()[:devices]), ("data",))


def replicated(mesh, memory_kind="device"):
    return NamedSharding(mesh, P(), memory_kind=memory_kind)


def train_state_shardings(mesh):
    """Parameters on device, Adam moments on host: ``{"params": ..., "opt": {"mu", "nu"}}``."""
    device = replicated(mesh)
    host = device.with_memory_kind("pinned_host")
    return {"params": {"w": device, "b": device}, "opt": {"mu": {"w": host, "b": host}, "nu": {"w": host, "b": host}}}


def host_tree(mesh, keys):
    host = replicated(mesh, "pinned_host")
    return {key: host for key in keys}


MESH4 = make_mesh(4)
STATE_SHARDINGS = train_state_shardings(MESH4)
"""A module-level tree other modules import by name."""
