"""Row: ``cond`` with both branches host -> E / E / ok."""

import jax
from jax import lax

from catalogue import OK, Case, E, to_host, vector


def cond_host(x):
    return lax.cond(
        x[0] > 0,
        lambda v: jax.device_put(v, to_host()),  # origin
        lambda v: jax.device_put(v * 2, to_host()),  # origin
        x,
    )


CASES = [Case("cond_both_branches_host", cond_host, vector, {"LEGACY": E, "PROPAGATION": E, "TYPED": OK}, "")]
