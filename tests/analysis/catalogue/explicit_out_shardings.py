"""Row: ``out_shardings`` with an explicit memory kind on every output -> ok everywhere.

JAX wraps each output in a placement annotation of the declared kind, so the host value
declared ``device`` is moved back before the return and the one declared host is streamed.
"""

import jax

from catalogue import OK, Case, sharding, to_host, vector


def offload_both_ways(x):
    h = jax.device_put(x, to_host())  # origin
    return h, h


CASES = [
    Case(
        "explicit_out_shardings_every_output",
        offload_both_ways,
        vector,
        {"LEGACY": OK, "PROPAGATION": OK, "TYPED": OK},
        jit=lambda: {"out_shardings": (sharding("pinned_host"), sharding("device"))},
        needs=("pinned_host", "device"),
    )
]
