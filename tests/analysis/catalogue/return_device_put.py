"""Row: return ``device_put(x, host)`` -> E / ok / ok."""

import jax

from catalogue import OK, Case, E, to_host, vector


def offload(x):
    return jax.device_put(x, to_host())  # origin


CASES = [Case("return_device_put", offload, vector, {"LEGACY": E, "PROPAGATION": OK, "TYPED": OK}, "")]
