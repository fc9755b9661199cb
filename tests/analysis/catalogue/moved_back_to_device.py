"""Correct programs: a host value moved back to device before it is returned -> ok everywhere,
spelled with a ``memory_kind="device"`` target and, from 0.7.1, ``jax.memory.Space.Device``."""

import jax

from catalogue import OK, Case, to_device, to_host, vector
from offload_fixer.jax_compat import spelling

EVERYWHERE_OK = {"LEGACY": OK, "PROPAGATION": OK, "TYPED": OK}


def device_kind_move_back(x):
    h = jax.device_put(x, to_host())  # origin
    return jax.device_put(h, to_device()) * 2, x


def memory_space_move_back(x):
    h = jax.device_put(x, jax.memory.Space.Host)  # origin
    return jax.device_put(h, jax.memory.Space.Device) * 2, x


def _no_memory_space_api():
    return None if spelling().memory_space_api else "jax.memory.Space exists from JAX 0.7.1"


CASES = [
    Case("moved_back_with_device_memory_kind", device_kind_move_back, vector, EVERYWHERE_OK),
    Case("moved_back_with_memory_space", memory_space_move_back, vector, EVERYWHERE_OK, skip_if=_no_memory_space_api),
]
