"""The trigger catalogue of ``docs/jax-versions.md`` as real JAX programs.

Every module here holds one catalogue row: small jitted programs (``CASES``) and what the row
predicts for each JAX regime. ``tests/analysis/test_trigger_catalogue.py`` lowers each program
for ``tpu`` on the CPU, analyses it and checks the verdict for the installed JAX, the output's
pytree path and the source line of the move that made the value host memory (the line marked
``# origin`` in the program, found with ``inspect``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

E = "E"
OK = "ok"


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable[..., Any]
    """The user function; its source holds the ``# origin`` line(s)."""
    args: Callable[[], tuple[Any, ...]]
    expect: dict[str, str]
    """Regime name (``LEGACY``/``PROPAGATION``/``TYPED``) -> ``E`` or ``ok``."""
    output_path: str | None = ""
    """Pytree path of the offending output; ``None`` when ``output_leaf`` finds it instead."""
    output_leaf: Callable[[Any], bool] | None = None
    """Picks the offending leaf of ``jax.eval_shape(fn, *args)`` (paths with flattened keys)."""
    jit: Callable[[], dict[str, Any]] = dict
    """``jax.jit`` keyword arguments, built lazily (shardings need a live backend)."""
    origin_kind: str = "move_to_host"
    origin_in: Callable[..., Any] | tuple[Callable[..., Any], ...] | None = None
    """The function(s) whose source holds the ``# origin`` lines, when it is not ``fn``."""
    needs: tuple[str, ...] = ()
    """Memory kinds the local backend must offer (for ``in_shardings``/``out_shardings``)."""
    skip_if: Callable[[], str | None] = lambda: None
    """Why the program cannot be expressed with the installed JAX and backend, if it cannot."""
    also: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Regime name -> further diagnostic codes XLA's pass produces for this program."""


def to_host() -> Any:
    """The ``device_put`` target that moves a value to pinned host memory inside ``jit``."""
    from offload_fixer.jax_compat import memory_move_target

    return memory_move_target("pinned_host")


def to_device() -> Any:
    """The ``device_put`` target that moves a value back to device memory inside ``jit``."""
    from offload_fixer.jax_compat import memory_move_target

    return memory_move_target("device")


def sharding(memory_kind: str) -> Any:
    """A concrete single-device sharding in ``memory_kind`` (for in/out_shardings)."""
    import jax

    return jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind=memory_kind)


def vector() -> tuple[Any, ...]:
    import jax.numpy as jnp

    return (jnp.arange(8, dtype=jnp.float32),)
