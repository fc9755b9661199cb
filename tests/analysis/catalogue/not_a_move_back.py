"""Row: a host value then ``device_put(x, jax.devices()[0])`` or ``device_put(x)`` -> E / E / ok;
neither moves the value back to device (from 0.7.1 it stays typed host).

Each program also returns its argument, so the entry root is a tuple: a single output that is
a move to host is repaired by the released compilers in every regime (``return_device_put``)."""

import jax

from catalogue import OK, Case, E, to_host, vector

ROW = {"LEGACY": E, "PROPAGATION": E, "TYPED": OK}


def put_on_device_object(x):
    h = jax.device_put(x, to_host())  # origin
    return jax.device_put(h, jax.devices()[0]), x


def put_without_target(x):
    h = jax.device_put(x, to_host())  # origin
    return jax.device_put(h), x


CASES = [
    Case("device_put_to_device_object_is_not_a_move", put_on_device_object, vector, ROW, "[0]"),
    Case("device_put_without_target_is_not_a_move", put_without_target, vector, ROW, "[0]"),
]
