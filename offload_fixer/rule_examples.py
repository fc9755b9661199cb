"""The rule pages' example programs: an invalid and a valid one per code (Fixit's model).

Each is a real program for the JAX version it is rendered for (spellings come from
:mod:`offload_fixer.jax_compat`) and defines ``f`` (a jitted function) and ``args`` (arguments
to trace it with), so the tests lower it, analyse it and have the released compilers judge it
(``tests/test_rules.py``, ``tests/xla/test_rule_examples.py``).
"""

from __future__ import annotations

import string
from collections.abc import Callable

from offload_fixer.jax_compat import SPACE_DEVICE, SPACE_HOST, Regime, Spelling
from offload_fixer.model import UNPINNED_HOST

Example = Callable[[Spelling], str]
"""An example program, rendered for a JAX version's spelling."""


# Bodies use $HOST / $DEVICE (targets of a move inside jit),
# $HOST_SHARDING / $DEVICE_SHARDING (shardings for in_shardings/out_shardings) and
# $UNPINNED; the preamble defines whatever the chosen spelling of those needs.
def _render_example(sp: Spelling, body: str) -> str:
    typed = sp.regime is Regime.TYPED
    if typed:
        words = {
            "HOST": SPACE_HOST,
            "DEVICE": SPACE_DEVICE,
            "HOST_SHARDING": "host_sharding",
            "DEVICE_SHARDING": f'host_sharding.with_memory_kind("{sp.device_kind}")',
        }
    else:
        words = {"HOST": "host", "DEVICE": "device", "HOST_SHARDING": "host", "DEVICE_SHARDING": "device"}
    words["UNPINNED"] = "unpinned"
    template = string.Template(body)
    used = {name for name in words if f"${name}" in body or f"${{{name}}}" in body}
    needs_sharding_import = bool(used & {"HOST_SHARDING", "DEVICE_SHARDING", "UNPINNED"}) or (
        not typed and bool(used & {"HOST", "DEVICE"})
    )
    imports = ["import jax", "import jax.numpy as jnp"]
    if "lax." in body:
        imports.append("from jax import lax")
    if needs_sharding_import:
        imports.append("from jax.sharding import SingleDeviceSharding")
    definitions = []
    first_device = "jax.devices()[0]"
    if typed and used & {"HOST_SHARDING", "DEVICE_SHARDING"}:
        definitions.append(f'host_sharding = SingleDeviceSharding({first_device}, memory_kind="{sp.host_kind}")')
    if not typed and used & {"HOST", "DEVICE", "HOST_SHARDING", "DEVICE_SHARDING"}:
        definitions.append(f'host = SingleDeviceSharding({first_device}, memory_kind="{sp.host_kind}")')
        if used & {"DEVICE", "DEVICE_SHARDING"}:
            definitions.append(f'device = host.with_memory_kind("{sp.device_kind}")')
    if "UNPINNED" in used:
        definitions.append(f'unpinned = SingleDeviceSharding({first_device}, memory_kind="{UNPINNED_HOST}")')
    blocks = ["\n".join(imports)] + (["\n".join(definitions)] if definitions else [])
    return "\n\n".join(blocks) + "\n\n\n" + template.substitute(words).strip("\n") + "\n"


def _example(body: str) -> Example:
    return lambda sp: _render_example(sp, body)


def _by_regime(typed: str, older: str) -> Example:
    return lambda sp: _render_example(sp, typed if sp.regime is Regime.TYPED else older)


_OFL1200_INVALID_TYPED = """
def update(params, grads, momentum):
    momentum = 0.9 * momentum + grads
    params = params - 0.1 * momentum  # `params` was passed in host memory
    return params, jax.device_put(momentum, $HOST)


# Compiled ahead of time from shapes, as large training loops do: `params` is typed as
# device memory but arrives in host memory, and the update returns it as a device output.
f = jax.jit(update, in_shardings=($HOST_SHARDING, None, None))
args = (jax.ShapeDtypeStruct((8,), jnp.float32),) * 3
"""

_OFL1200_VALID_TYPED = """
def update(params, grads, momentum):
    params = jax.device_put(params, $DEVICE)  # streamed in from host memory first
    momentum = 0.9 * momentum + grads
    params = params - 0.1 * momentum
    return params, jax.device_put(momentum, $HOST)


f = jax.jit(update, in_shardings=($HOST_SHARDING, None, None))
args = (jax.ShapeDtypeStruct((8,), jnp.float32),) * 3
"""

_OFL1200_INVALID_OLDER = """
@jax.jit
def f(x):
    saved = jax.device_put(x * 2, $HOST)  # offloaded to host memory
    return saved + 1  # computed in host memory, returned as a device output


args = (jnp.ones(8),)
"""

_OFL1200_VALID_OLDER = """
@jax.jit
def f(x):
    saved = jax.device_put(x * 2, $HOST)
    return jax.device_put(saved, $DEVICE) + 1  # back on device before anything else


args = (jnp.ones(8),)
"""

_OFL1201_INVALID = """
@jax.jit
def f(x):
    offloaded = jax.device_put(x, $HOST)
    y = jnp.sin(offloaded)  # runs on the host CPU, on data in host memory
    return jax.device_put(y, $DEVICE)


args = (jnp.ones(8),)
"""

_OFL1201_VALID = """
@jax.jit
def f(x):
    offloaded = jax.device_put(x, $HOST)
    return jnp.sin(jax.device_put(offloaded, $DEVICE))


args = (jnp.ones(8),)
"""

_OFL1202_INVALID = """
@jax.jit
def f(history, row):
    offloaded = jax.device_put(history, $HOST)
    # XLA turns this update into a dynamic-update-slice of `history`, a device argument.
    return offloaded.at[0].set(row), row


args = (jnp.zeros((4, 8)), jnp.ones(8))
"""

_OFL1202_VALID = """
@jax.jit
def f(row):
    # A fresh buffer: XLA allocates it in host memory in place of the broadcast.
    offloaded = jax.device_put(jnp.zeros((4, 8)), $HOST)
    return offloaded.at[0].set(row), row


args = (jnp.ones(8),)
"""

_OFL1204_INVALID = """
@jax.jit
def f(x):
    # JAX types "unpinned_host" as device memory; XLA still moves the value to host.
    return jax.device_put(x * 2, $UNPINNED)


args = (jnp.ones(8),)
"""

_OFL1204_VALID = """
@jax.jit
def f(x):
    return jax.device_put(x * 2, $HOST)


args = (jnp.ones(8),)
"""

_OFL1205_INVALID = """
@jax.jit
def f(rows):
    history = jax.device_put(jnp.zeros_like(rows), $HOST)

    def keep_going(state):
        i, history = state
        return (i < rows.shape[0]) & (jnp.sum(history) < 1e6)  # reads the offloaded buffer

    def write_row(state):
        i, history = state
        row = jax.device_put(rows[i] * 2, $HOST)
        return i + 1, lax.dynamic_update_slice(history, row[None], (i, 0))

    return lax.while_loop(keep_going, write_row, (0, history))[1]


args = (jnp.ones((4, 8)),)
"""

_OFL1205_VALID = """
@jax.jit
def f(rows):
    history = jax.device_put(jnp.zeros_like(rows), $HOST)

    def keep_going(state):
        i, total, history = state
        return (i < rows.shape[0]) & (total < 1e6)  # the running total stays on device

    def write_row(state):
        i, total, history = state
        row = rows[i] * 2
        written = lax.dynamic_update_slice(history, jax.device_put(row, $HOST)[None], (i, 0))
        return i + 1, total + jnp.sum(row), written

    return lax.while_loop(keep_going, write_row, (0, 0.0, history))[2]


args = (jnp.ones((4, 8)),)
"""

_OFL1207_INVALID = """
def mix(weights, x):
    def layer(h, w):
        # `w` is a slice of the host-resident weights: the dot runs in host memory.
        return jnp.tanh(h @ w), None

    h, _ = lax.scan(layer, x, weights)
    return h


f = jax.jit(mix, in_shardings=($HOST_SHARDING, None), out_shardings=$HOST_SHARDING)
args = (jax.ShapeDtypeStruct((3, 128, 128), jnp.float32), jax.ShapeDtypeStruct((8, 128), jnp.float32))
"""

_OFL1207_VALID = """
def mix(weights, x):
    weights = jax.device_put(weights, $DEVICE)  # stream the weights in first

    def layer(h, w):
        return jnp.tanh(h @ w), None

    h, _ = lax.scan(layer, x, weights)
    return h


f = jax.jit(mix, in_shardings=($HOST_SHARDING, None))
args = (jax.ShapeDtypeStruct((3, 128, 128), jnp.float32), jax.ShapeDtypeStruct((8, 128), jnp.float32))
"""

_OFL1206_INVALID = """
def first_half(x):
    offloaded = jax.device_put(x, $HOST)
    return offloaded[:4]  # sliced in host memory, never moved back


f = jax.jit(first_half, out_shardings=$HOST_SHARDING)
args = (jnp.ones(8),)
"""

_OFL1206_VALID = """
@jax.jit
def f(x):
    offloaded = jax.device_put(x, $HOST)
    return jax.device_put(offloaded[:4], $DEVICE)  # only the slice is copied to device


args = (jnp.ones(8),)
"""


OFL1200_INVALID = _by_regime(_OFL1200_INVALID_TYPED, _OFL1200_INVALID_OLDER)
OFL1200_VALID = _by_regime(_OFL1200_VALID_TYPED, _OFL1200_VALID_OLDER)
OFL1201_INVALID, OFL1201_VALID = _example(_OFL1201_INVALID), _example(_OFL1201_VALID)
OFL1202_INVALID, OFL1202_VALID = _example(_OFL1202_INVALID), _example(_OFL1202_VALID)
OFL1204_INVALID, OFL1204_VALID = _example(_OFL1204_INVALID), _example(_OFL1204_VALID)
OFL1205_INVALID, OFL1205_VALID = _example(_OFL1205_INVALID), _example(_OFL1205_VALID)
OFL1206_INVALID, OFL1206_VALID = _example(_OFL1206_INVALID), _example(_OFL1206_VALID)
OFL1207_INVALID, OFL1207_VALID = _example(_OFL1207_INVALID), _example(_OFL1207_VALID)
