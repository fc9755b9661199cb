"""Row: a scan or while carry that is an unchanged host value -> E / E (0.6.2: ok) / ok."""

import jax
import jax.numpy as jnp
from jax import lax

from catalogue import OK, Case, E, to_host, vector
from offload_fixer.jax_compat import installed_version, parse_version

PROPAGATION = OK if (0, 6, 2) <= parse_version(installed_version()) <= (0, 7, 0) else E
ROW = {"LEGACY": E, "PROPAGATION": PROPAGATION, "TYPED": OK}


def scan_carry(x):
    h = jax.device_put(x, to_host())  # origin
    carry, _ = lax.scan(lambda c, _: (c, None), h, None, length=3)
    return carry


def while_carry(x):
    h = jax.device_put(x, to_host())  # origin
    _, carry = lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1]), (jnp.int32(0), h))
    return carry


CASES = [
    Case("scan_carry_unchanged_host", scan_carry, vector, ROW, ""),
    Case("while_carry_unchanged_host", while_carry, vector, ROW, ""),
]
