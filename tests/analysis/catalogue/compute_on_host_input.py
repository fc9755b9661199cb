"""Row: a host input into ``compute_on("device_host")``, result returned -> - / E / ok per
jax-versions.md; here ok in every regime, following XLA.

``compute_on`` does not exist before 0.4.29, hence no LEGACY verdict; from 0.11.1 it wraps a
function and takes the outputs' memory spaces (``jax_compat.compute_on_host`` spells it for
the installed JAX). The spec's E for 0.4.29 - 0.7.0 reads the lowered module (the host
input, the result without a memory kind), but by the time XLA's host offloader runs, the compute_on call is an async host call
(``custom-call-start`` "HostExecute"; see host_offloader_test.cc
RemoveRedundantCopiesBackToHostOutputIsNonTuple, lowered from jax/tests/memories_test.py). The
walk enters its wrapped computation and stops at the non-aliasing custom call, and the host
call's results are device buffers (BasicAsyncHostOffloadedCall_NoChangesWhenEntryLayoutExpectsHBM
compiles with a host input and device outputs), so no host value reaches the device output.
"""

import jax

from catalogue import OK, Case, sharding, to_host, vector
from offload_fixer.jax_compat import compute_on_host

ROW = {"LEGACY": None, "PROPAGATION": OK, "TYPED": OK}


@compute_on_host
@jax.jit
def _double_on_host(x):
    return x * 2


def moved_then_host_compute(x):
    h = jax.device_put(x, to_host())  # origin
    return _double_on_host(h)


def host_argument_into_host_compute(x):
    return _double_on_host(x)


def host_vector():
    (x,) = vector()
    return (jax.device_put(x, sharding("pinned_host")),)


CASES = [
    Case("moved_input_into_compute_on", moved_then_host_compute, vector, ROW, ""),
    Case(
        "host_argument_into_compute_on",
        host_argument_into_host_compute,
        host_vector,
        ROW,
        "",
        jit=lambda: {"in_shardings": sharding("pinned_host")},
        origin_kind="host_argument",
        needs=("pinned_host",),
    ),
]
