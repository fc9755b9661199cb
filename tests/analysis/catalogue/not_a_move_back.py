"""Row: a host value then ``device_put(x, jax.devices()[0])`` or ``device_put(x)`` -> ok / ok / ok.

Neither moves the value back to device (from 0.7.1 it stays typed host). The spec's catalogue
says E where JAX declares the output device memory (<= 0.7.0); but the move to host is then the
whole single output, which the released compilers repair (a copy to host takes its place).
"""

import jax

from catalogue import OK, Case, to_host, vector

ROW = {"LEGACY": OK, "PROPAGATION": OK, "TYPED": OK}


def put_on_device_object(x):
    h = jax.device_put(x, to_host())  # origin
    return jax.device_put(h, jax.devices()[0])


def put_without_target(x):
    h = jax.device_put(x, to_host())  # origin
    return jax.device_put(h)


CASES = [
    Case("device_put_to_device_object_is_not_a_move", put_on_device_object, vector, ROW, ""),
    Case("device_put_without_target_is_not_a_move", put_without_target, vector, ROW, ""),
]
