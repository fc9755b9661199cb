"""Row: ``device_put(x, unpinned_host)`` returned -> ok / ok / ok.

The spec's catalogue (from XLA's main branch) says E where JAX types the result as device
memory (<= 0.4.28, >= 0.7.1). The released compilers repair a move to host that is the whole
single output (a copy takes its place) instead of rejecting it, so no regime fails; the move
is still reported (OFL1204: JAX and XLA disagree on what "unpinned_host" is).
"""

import jax

from catalogue import OK, Case, vector
from offload_fixer.jax_compat import memory_move_target


def offload_unpinned(x):
    return jax.device_put(x, memory_move_target("unpinned_host"))  # origin


def _unpinned_is_default_memory():
    if jax.devices()[0].default_memory().kind == "unpinned_host":
        return "unpinned_host is this backend's default memory, so JAX emits no move to it"
    return None


CASES = [
    Case(
        "return_device_put_unpinned_host",
        offload_unpinned,
        vector,
        {"LEGACY": OK, "PROPAGATION": OK, "TYPED": OK},
        "",
        skip_if=_unpinned_is_default_memory,
        also={"PROPAGATION": ("OFL1204",), "TYPED": ("OFL1204",)},
    )
]
