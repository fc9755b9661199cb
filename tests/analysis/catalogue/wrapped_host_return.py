"""Row: nested jit, custom_jvp, stop_gradient, optimization_barrier, shard_map returning host
-> E / E / ok.

Each program also returns its argument, so the entry root is a tuple: a single output that is
a move to host is repaired by the released compilers in every regime (``return_device_put``).
XLA's call inliner keeps a shard_map body (``shmap_body``) as a call, so its move would fail
even as the whole single output."""

import jax
import numpy as np
from jax import lax
from jax.sharding import Mesh, PartitionSpec

from catalogue import OK, Case, E, to_host, vector
from offload_fixer.jax_compat import shard_map_function

ROW = {"LEGACY": E, "PROPAGATION": E, "TYPED": OK}


def _offload(x):
    return jax.device_put(x, to_host())  # origin


_inner_offload = jax.jit(_offload)
_offload_with_jvp = jax.custom_jvp(_offload)


@_offload_with_jvp.defjvp
def _offload_jvp(primals, tangents):
    return _offload_with_jvp(primals[0]), tangents[0]


def nested_jit(x):
    return _inner_offload(x), x


def custom_jvp(x):
    return _offload_with_jvp(x), x


def stop_gradient(x):
    return lax.stop_gradient(jax.device_put(x, to_host())), x  # origin


def optimization_barrier(x):
    return lax.optimization_barrier(jax.device_put(x, to_host())), x  # origin


def shard_map(x):
    mesh = Mesh(np.array(jax.devices()[:1]), ("d",))
    body = lambda v: jax.device_put(v, to_host())  # origin
    spec = PartitionSpec()
    return shard_map_function()(body, mesh=mesh, in_specs=spec, out_specs=spec)(x), x


CASES = [
    Case("nested_jit_returns_host", nested_jit, vector, ROW, "[0]", origin_in=_offload),
    Case("custom_jvp_returns_host", custom_jvp, vector, ROW, "[0]", origin_in=_offload),
    Case("stop_gradient_returns_host", stop_gradient, vector, ROW, "[0]"),
    Case("optimization_barrier_returns_host", optimization_barrier, vector, ROW, "[0]"),
    Case("shard_map_returns_host", shard_map, vector, ROW, "[0]"),
]
