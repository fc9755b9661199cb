"""Plain targets for the codemods: line numbers, pytree paths and the JAX version's spelling
(:class:`offload_fixer.jax_compat.Spelling`, taken as it is).

Each codemod declares its own small target (``FixCommand.TARGET``), the fields it reads and no
more: :class:`FunctionTarget` is what every one reads, :class:`HostValueTarget` what the two that
spell a sharding for the host value read besides. Nothing here knows about MLIR or imports JAX:
the planner in ``offload_fixer.fixes`` reads a diagnostic into every field any codemod reads and
hands each codemod its own part, and ``python -m libcst.tool codemod`` builds the same target
from command-line flags.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Literal, TypeVar

from offload_fixer import jax_compat
from offload_fixer.model import EditSafety

Placement = Literal["return", "entry", "after_origin", "operand", "out_shardings", "pin_memory", "rename_name", "eager"]
T = TypeVar("T", bound="FunctionTarget")

LINE_FLAGS = {
    "function_line": "--function-line",
    "inner_line": "--inner-line",
    "origin_line": "--origin-line",
    "return_lines": "--return-line",
    "compute_spans": "--compute-line",
    "eager_line": "--eager-line",
}
"""The fields that hold lines of the file (a line, lines, or (line, column) pairs), each with the
flag that sets it: what moves when an edit adds lines above them, what a standalone run checks
against the file and what an excerpt must keep."""


@dataclass(frozen=True)
class FunctionTarget:
    """The function a fix goes in: a line of its ``def``/decorators, or a line inside it, and
    its name."""

    function_name: str | None = None
    function_line: int | None = None
    inner_line: int | None = None
    file_words: ClassVar[tuple[str, ...]] = ()
    """Words whose every mention in the file the codemod reads (the statements a fix's
    excerpt keeps besides the target's own lines)."""

    def lines(self) -> list[tuple[str, int]]:
        """(flag, line) for every line of the file the target names, in :data:`LINE_FLAGS`' order."""
        out: list[tuple[str, int]] = []
        for name, flag in _line_fields(self):
            value = getattr(self, name)
            for item in value if isinstance(value, tuple) else (value,):
                line = item[0] if isinstance(item, tuple) else item
                if line is not None:
                    out.append((flag, line))
        return out

    def remapped(self: T, lines: Callable[[int | None], int | None]) -> T:
        """The target with each of its lines moved where ``lines`` maps it."""
        changes: dict[str, Any] = {}
        for name, _ in _line_fields(self):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                changes[name] = lines(value)
            else:
                changes[name] = tuple((lines(v[0]), *v[1:]) if isinstance(v, tuple) else lines(v) for v in value)
        return replace(self, **changes)


@dataclass(frozen=True)
class HostValueTarget(FunctionTarget):
    """Where the host value comes from (the move to host, or the host argument and the leaf
    inside it) and how the target JAX version spells a sharding: what a codemod that writes a
    sharding for that value derives it from."""

    origin_line: int | None = None
    origin_col: int | None = None
    parameter: str | None = None
    parameter_index: int | None = None
    parameter_path: str = ""
    """Pytree path of the host leaf inside the parameter (``"['mu']['w']"``), to find its
    ``in_shardings`` entry."""
    spelling: jax_compat.Spelling = field(
        default_factory=functools.partial(jax_compat.spelling, jax_compat.NEWEST_MODELLED)
    )
    """How the target JAX version spells the fix; default: the newest modelled."""


def narrowed(cls: type[T], wide: FunctionTarget, **changes: Any) -> T:
    """``cls``'s target taken from a wider one (``changes`` first): the fields ``cls`` reads,
    by name, so a codemod is handed exactly its own."""
    merged = replace(wide, **changes) if changes else wide
    return cls(**{f.name: getattr(merged, f.name) for f in fields(cls)})


def _line_fields(target: FunctionTarget) -> list[tuple[str, str]]:
    names = {f.name for f in fields(target)}
    return [(name, flag) for name, flag in LINE_FLAGS.items() if name in names]


@dataclass(frozen=True)
class Edit:
    line: int
    description: str
    safety: EditSafety
    reason: str = ""
    """Why an unsafe edit is unsafe."""
    subject: str = ""
    """What the edit moves or declares (``opt_state['mu']``, ``output [1]``), for a title."""
    host_compute_kept: tuple[int, ...] = ()
    """Lines whose computation on the host value the edit leaves in host memory (the update
    ``stack - 0.1 * grads`` of a stack moved slice by slice): the host-compute findings there
    stay, so the plan does not claim them."""
