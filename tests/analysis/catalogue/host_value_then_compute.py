"""Row: a host value then elementwise / reshape / transpose / index / astype, returned -> E / E / ok.

Each program also returns its argument, so the entry root is a tuple: a bitcast-like reshape
returned alone would leave XLA's walk without a starting instruction.
"""

import jax
import jax.numpy as jnp

from catalogue import OK, Case, E, to_host, vector

ROW = {"LEGACY": E, "PROPAGATION": E, "TYPED": OK}


def elementwise(x):
    h = jax.device_put(x, to_host())  # origin
    return h * 2, x


def reshape(x):
    h = jax.device_put(x, to_host())  # origin
    return h.reshape(2, 4), x


def transpose(x):
    h = jax.device_put(x.reshape(2, 4), to_host())  # origin
    return h.T, x


def index(x):
    h = jax.device_put(x, to_host())  # origin
    return h[1:3], x


def astype(x):
    h = jax.device_put(x, to_host())  # origin
    return h.astype(jnp.bfloat16), x


CASES = [
    # XLA's sources CHECK that the starting instruction has one operand (openxla/xla#34565); no
    # released compiler aborts on this two-operand multiply: it becomes host compute.
    Case("host_then_elementwise", elementwise, vector, ROW, "[0]"),
    Case("host_then_reshape", reshape, vector, ROW, "[0]"),
    Case("host_then_transpose", transpose, vector, ROW, "[0]"),
    Case("host_then_index", index, vector, ROW, "[0]"),
    Case("host_then_astype", astype, vector, ROW, "[0]"),
]
