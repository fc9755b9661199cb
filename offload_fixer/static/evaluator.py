"""What the JAX-API semantics (:mod:`.jax_api`, :mod:`.control_flow`) ask of the interpreter,
and how they read a call's arguments.

The semantics are functions of abstract values; the few that trace a function the program
passes them (``lax.scan``'s body, ``jax.tree.map``'s function) call back into the interpreter
through :class:`Evaluator`, which :class:`.interpreter.Interpreter` implements.
"""

from __future__ import annotations

from typing import Any, Protocol

MAX_CALL_DEPTH = 8
MAX_EVALUATIONS = 200_000
"""Per jit site; a pathological file ends that site's analysis instead of the run."""


class Unsupported(Exception):
    """The function does something the check does not model (generators, await, budget)."""


class Evaluator(Protocol):
    def ev(self, node: Any, scope: Any) -> Any:
        """The abstract value of expression ``node`` in ``scope``."""

    def apply(self, callee: Any, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        """The abstract result of calling ``callee`` (traced when it is a function of the project)."""

    def compute(self, op: str, operands: tuple, node: Any, kind: str = "compute") -> Any:
        """The single array an operation computes from its operands' data."""


ABSENT: Any = object()
"""An argument the call does not pass."""


def call_argument(args: list, kwargs: dict, position: int, keyword: str, default: Any = ABSENT) -> Any:
    """A parameter's argument, passed by position or by keyword."""
    if len(args) > position:
        return args[position]
    return kwargs.get(keyword, default)
