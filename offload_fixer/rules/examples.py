"""How a rule's example programs are written once for every JAX version (Fixit's model: each
rule module lists its invalid and valid programs; this module renders them).

Each is a real program for the JAX version it is rendered for (spellings come from
:mod:`offload_fixer.jax_compat`) and defines ``f`` (a jitted function) and ``args`` (arguments
to trace it with), so the tests lower it, analyse it and have the released compilers judge it
(``tests/test_rules.py``, ``tests/xla/test_rule_examples.py``); a rule JAX judges itself
(``Rule.judged_by_jax``) has programs the tests run instead.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass

from offload_fixer.jax_compat import Regime, Spelling
from offload_fixer.model import UNPINNED_HOST

Example = Callable[[Spelling], str]
"""An example program, rendered for a JAX version's spelling."""


# Bodies use $HOST / $DEVICE (targets of a move inside jit),
# $HOST_SHARDING / $DEVICE_SHARDING (shardings for in_shardings/out_shardings) and
# $UNPINNED; the preamble defines whatever the chosen spelling of those needs: the version's
# memory-space enum where it has one (``Spelling.memory_space``), else shardings.
def _render_example(sp: Spelling, body: str) -> str:
    space = sp.memory_space
    typed = space is not None
    if space is not None:
        words = {
            "HOST": space.host,
            "DEVICE": space.device,
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
    if "pl." in body:
        imports.append("from jax.experimental import pallas as pl")
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


def example(body: str) -> Example:
    """A program written once for every JAX version."""
    return lambda sp: _render_example(sp, body)


def by_regime(typed: str, older: str) -> Example:
    """A program written twice: for JAX >= 0.7.1 (memory kinds are types) and for older JAX."""
    return lambda sp: _render_example(sp, typed if sp.regime is Regime.TYPED else older)


@dataclass(frozen=True)
class TargetOnly:
    """An example only one target's compiler can be given (a Pallas TPU kernel, which JAX
    lowers for no other platform), and why: the tests skip it for the other targets, saying so."""

    render: Example
    target: str
    reason: str

    def __call__(self, sp: Spelling) -> str:
        return self.render(sp)


def tpu_only(body: str, reason: str) -> TargetOnly:
    """A program written once for every JAX version, for the TPU compiler alone."""
    return TargetOnly(example(body), "tpu", reason)


def not_for(program: Example, target: str) -> str | None:
    """Why ``program`` cannot be given to ``target``'s compiler, if it cannot."""
    if isinstance(program, TargetOnly) and program.target != target:
        return f"the example is for {program.target} only: {program.reason}"
    return None
