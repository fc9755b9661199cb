"""Rows: ``in_shardings`` host and ``x * 2`` returned (with or without ``donate_argnums``),
traced with ``ShapeDtypeStruct`` -> E in every version; with an explicit ``out_shardings`` of
any kind -> ok everywhere; the host input moved to device before compute -> ok everywhere."""

import jax
import jax.numpy as jnp

from catalogue import OK, Case, E, sharding, to_device

EVERYWHERE_E = {"LEGACY": E, "PROPAGATION": E, "TYPED": E}
EVERYWHERE_OK = {"LEGACY": OK, "PROPAGATION": OK, "TYPED": OK}
HOST_MEMORY = ("pinned_host", "device")


def abstract_vector():
    return (jax.ShapeDtypeStruct((8,), jnp.float32),)


def double(x):
    return x * 2


def move_then_double(x):
    return jax.device_put(x, to_device()) * 2


def _host_in(out=None, **more):
    def jit_kwargs():
        kwargs = {"in_shardings": sharding("pinned_host"), **more}
        if out:
            kwargs["out_shardings"] = sharding(out)
        return kwargs

    return jit_kwargs


CASES = [
    Case("host_in_shardings_double", double, abstract_vector, EVERYWHERE_E, "", jit=_host_in(),
         origin_kind="host_argument", needs=HOST_MEMORY),
    Case("host_in_shardings_double_donated", double, abstract_vector, EVERYWHERE_E, "",
         jit=_host_in(donate_argnums=0), origin_kind="host_argument", needs=HOST_MEMORY),
    Case("host_in_host_out_shardings", double, abstract_vector, EVERYWHERE_OK,
         jit=_host_in(out="pinned_host"), needs=HOST_MEMORY),
    Case("host_in_device_out_shardings", double, abstract_vector, EVERYWHERE_OK,
         jit=_host_in(out="device"), needs=HOST_MEMORY),
    Case("host_in_moved_to_device_first", move_then_double, abstract_vector, EVERYWHERE_OK, jit=_host_in(),
         needs=HOST_MEMORY),
]
