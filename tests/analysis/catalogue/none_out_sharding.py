"""Row: ``out_shardings=(None, dev)`` with the host value under ``None`` -> E / ok / ok."""

import jax

from catalogue import OK, Case, E, sharding, to_host, vector


def host_under_none(x):
    return jax.device_put(x, to_host()), x * 2  # origin


CASES = [
    Case(
        "none_out_sharding_keeps_host",
        host_under_none,
        vector,
        {"LEGACY": E, "PROPAGATION": OK, "TYPED": OK},
        "[0]",
        jit=lambda: {"out_shardings": (None, sharding("device"))},
        needs=("device",),
    )
]
