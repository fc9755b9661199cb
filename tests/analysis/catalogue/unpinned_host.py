"""Row: ``device_put(x, unpinned_host)`` returned -> E / ok / E."""

import jax

from catalogue import OK, Case, E, vector
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
        {"LEGACY": E, "PROPAGATION": OK, "TYPED": E},
        "",
        skip_if=_unpinned_is_default_memory,
        also={"TYPED": ("OFL1204",)},
    )
]
