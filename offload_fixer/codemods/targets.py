"""Plain targets for the codemods: line numbers, pytree paths and the JAX version's spelling
(:class:`offload_fixer.jax_compat.Spelling`, taken as it is).

Nothing here knows about MLIR or imports JAX: the planner in ``offload_fixer.fixes`` turns a
diagnostic into a :class:`FixTarget`, and ``python -m libcst.tool codemod`` builds the same
target from command-line flags.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Literal

from offload_fixer import jax_compat
from offload_fixer.model import EditSafety

Placement = Literal["return", "entry", "after_origin", "operand", "out_shardings", "pin_memory"]


@dataclass(frozen=True)
class FixTarget:
    """Where one fix goes: a function (by a line of its ``def``/decorators, or a line
    inside it, and its name), the outputs (pytree paths relative to the returned value)
    and, depending on ``placement``, the returns, the parameter or the origin line."""

    function_name: str | None = None
    function_line: int | None = None
    inner_line: int | None = None
    output_paths: tuple[str, ...] = ("",)
    placement: Placement = "return"
    return_lines: tuple[int, ...] = ()
    """Edit only the returns starting on these lines; empty means every return."""
    parameter: str | None = None
    parameter_index: int | None = None
    parameter_path: str = ""
    """Pytree path of the host leaf inside the parameter (``"['mu']['w']"``), to find its
    ``in_shardings`` entry."""
    parameter_leaves: tuple[str, ...] = ()
    """Paths inside ``parameter`` of the host leaves to move (``"['mu']"``); empty: all of it."""
    narrow: bool = True
    """Move a stack the function only scans over slice by slice, in the scan's body; False: the
    whole argument where the function starts (the wider plan, tried when the narrow one fails)."""
    origin_line: int | None = None
    origin_col: int | None = None
    compute_spans: tuple[tuple[int, int], ...] = ()
    """(line, column) of computations on the host value: ``operand`` moves it to device there."""
    output_kinds: tuple[tuple[str, str], ...] = ()
    """Every flat output of the function as (pytree path, memory kind), when known: the
    structure ``out_shardings`` must mirror and which outputs are host memory already."""
    spelling: jax_compat.Spelling = field(
        default_factory=functools.partial(jax_compat.spelling, jax_compat.NEWEST_MODELLED)
    )
    """How the target JAX version spells the fix; default: the newest modelled."""


@dataclass(frozen=True)
class Edit:
    line: int
    description: str
    safety: EditSafety
    reason: str = ""
    """Why an unsafe edit is unsafe."""
    subject: str = ""
    """What the edit moves or declares (``opt_state['mu']``, ``output [1]``), for a title."""
