"""Row: a tuple or dict containing a host value -> E / ok / ok."""

import jax

from catalogue import OK, Case, E, to_host, vector

ROW = {"LEGACY": E, "PROPAGATION": OK, "TYPED": OK}


def in_dict(x):
    return {"a": jax.device_put(x, to_host()), "b": x + 1}  # origin


def in_tuple(x):
    return x + 1, jax.device_put(x, to_host())  # origin


CASES = [
    Case("host_value_in_dict", in_dict, vector, ROW, "['a']"),
    Case("host_value_in_tuple", in_tuple, vector, ROW, "[1]"),
]
