"""Row: scan / lax.map / vmap putting ``ys`` to host in the body -> E / ok / ok."""

import jax
import jax.numpy as jnp
from jax import lax

from catalogue import OK, Case, E, to_host

ROW = {"LEGACY": E, "PROPAGATION": OK, "TYPED": OK}


def rows():
    return (jnp.arange(12, dtype=jnp.float32).reshape(3, 4),)


def scan_ys(xs):
    def body(carry, row):
        return carry + row.sum(), jax.device_put(row * 2, to_host())  # origin

    _, ys = lax.scan(body, jnp.float32(0), xs)
    return ys


def map_ys(xs):
    return lax.map(lambda row: jax.device_put(row * 2, to_host()), xs)  # origin


def vmap_ys(xs):
    return jax.vmap(lambda row: jax.device_put(row * 2, to_host()))(xs)  # origin


CASES = [
    Case("scan_ys_to_host", scan_ys, rows, ROW, ""),
    Case("lax_map_ys_to_host", map_ys, rows, ROW, ""),
    Case("vmap_ys_to_host", vmap_ys, rows, ROW, ""),
]
