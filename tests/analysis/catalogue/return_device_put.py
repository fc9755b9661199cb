"""Row: return ``device_put(x, host)`` -> ok / ok / ok.

The spec's catalogue says E for <= 0.4.28, where JAX declares the output device memory. A move
that is the whole single output is repaired by the released compilers (a copy to host takes its
place), so that regime compiles too.
"""

import jax

from catalogue import OK, Case, to_host, vector


def offload(x):
    return jax.device_put(x, to_host())  # origin


CASES = [Case("return_device_put", offload, vector, {"LEGACY": OK, "PROPAGATION": OK, "TYPED": OK}, "")]
