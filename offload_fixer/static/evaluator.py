"""What the JAX-API semantics (:mod:`.jax_api`, :mod:`.control_flow`) ask of the interpreter,
and how they read a call's arguments.

The semantics are functions of abstract values; the few that trace a function the program
passes them (``lax.scan``'s body, ``jax.tree.map``'s function) call back into the interpreter
through :class:`Evaluator`, the interface of the interpreter's parts.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

MAX_CALL_DEPTH = 8
MAX_EVALUATIONS = 200_000
"""Per jit site; a pathological file ends that site's analysis instead of the run."""


class Unsupported(Exception):
    """The function does something the check does not model (generators, await, budget)."""


class Evaluator:
    """The methods the parts of :class:`.interpreter.Interpreter` call on one another.

    Each part is a base class of the interpreter: :class:`.statements.StatementRunner` runs
    statements, :class:`.expressions.ExpressionEvaluator` evaluates expressions and calls, and
    the interpreter itself resolves names and finds jit sites. Each method below is defined by
    exactly one of them; the JAX-API semantics use ``ev``, ``apply`` and ``compute``.
    """

    _budget: int
    """Evaluations left for the current jit site (:data:`MAX_EVALUATIONS`)."""
    _host_compute_depth: int
    """How many ``with compute_on("device_host")`` blocks and calls of functions under
    ``compute_on``'s function form enclose the code being run."""
    _stack: list
    """The functions being traced, outermost first."""
    _changes_parameters: dict
    """``def``/lambda node -> whether it may change an object passed to it."""
    host_computations: list
    """``(origin, op, node)`` of each computation on a host value of the current jit site
    (:meth:`.expressions.ExpressionEvaluator.compute`): the source of OFL1201."""
    refusals: list
    """``(origin, op, node)`` of each operation of the current jit site that JAX >= 0.7.1
    refuses, its operands in different memory spaces: the source of OFL1215."""
    module_scope: Any
    """The checked module's scope."""
    _silent: int
    """How many evaluations under way record no eager operation (:mod:`.eager`)."""

    @contextmanager
    def computing_on_host(self) -> Iterator[None]:
        """Code the program itself runs on the host CPU (``compute_on("device_host")``)."""
        self._host_compute_depth += 1
        try:
            yield
        finally:
            self._host_compute_depth -= 1

    if TYPE_CHECKING:

        @property
        @abstractmethod
        def in_eager_code(self) -> bool:
            """Whether the code being run is outside any jit (:mod:`.eager`)."""

        @abstractmethod
        def ev(self, node: Any, scope: Any) -> Any:
            """The abstract value of expression ``node`` in ``scope``."""

        @abstractmethod
        def attribute_of(self, base: Any, attr: str, node: Any) -> Any:
            """``base.attr`` for an abstract value ``base``."""

        @abstractmethod
        def apply(self, callee: Any, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
            """The abstract result of calling ``callee`` (traced when it is a function of the project)."""

        @abstractmethod
        def compute(self, op: str, operands: tuple, node: Any, kind: str = "compute") -> Any:
            """The single array an operation computes from its operands' data."""

        @abstractmethod
        def inline(self, fn: Any, args: list, kwargs: dict, node: Any, final: dict | None = None) -> Any:
            """Trace a function of the project called with ``args``."""

        @abstractmethod
        def construct(self, cls: Any, args: list, kwargs: dict, node: Any) -> Any:
            """An instance of a class of the project."""

        @abstractmethod
        def instance_member(self, instance: Any, name: str, node: Any) -> Any:
            """``instance.name`` where it is not a field: a method, a property's value..."""

        @abstractmethod
        def forget_changed_instances(self, callee: Any, node: Any, scope: Any) -> None:
            """Forget the objects a call may change."""

        @abstractmethod
        def binary(self, left: Any, operator: Any, right: Any, node: Any) -> Any:
            """``left <operator> right`` (also for augmented assignments)."""

        @abstractmethod
        def constant_index(self, node: Any, scope: Any) -> Any:
            """The constant key of ``x[key]``, or None."""

        @abstractmethod
        def exec_block(self, statements: list, frame: Any, returns: list) -> bool:
            """Run statements; True when every path leaves the block."""

        @abstractmethod
        def assign(self, target: Any, value: Any, frame: Any) -> None:
            """Bind an assignment target (a name, a tuple to unpack...) in ``frame``."""

        @abstractmethod
        def is_flag(self, node: Any, test: Any, scope: Any) -> bool:
            """Whether a test is a configuration flag rather than a test on arrays."""

        @abstractmethod
        def forget_base(self, target: Any, frame: Any) -> None:
            """Forget the local object an attribute or item assignment changed."""

        @abstractmethod
        def forget_aliases(self, container: Any, frame: Any) -> None:
            """Forget every local name bound to a container that may have changed."""

        @abstractmethod
        def decorate(self, node: Any, scope: Any, closure: Any) -> Any:
            """The value a ``def`` binds, through its decorators."""

        @abstractmethod
        def module_attribute(self, module: Any, name: str, in_path: bool = False) -> Any:
            """``module.name`` for a module of the project."""

        @abstractmethod
        def local_names(self, node: Any) -> frozenset:
            """The names a function binds locally."""

        @abstractmethod
        def top_statement(self, index: int) -> Any:
            """The ``index``-th top-level statement of the checked module."""

        @abstractmethod
        def class_statements(self, node: Any) -> list:
            """The statements of a class's body."""

        @abstractmethod
        def analysed_call(self, jitted: Any, args: list, kwargs: dict, keep: bool) -> Any:
            """A jit site called from eager code: its result (``keep``: and its site first)."""

        @abstractmethod
        def trace_site(self, jitted: Any, called: Any) -> tuple[Any, Any]:
            """A jit site's result and returned value, traced from its ``in_shardings`` or
            (``called``) from the arguments eager code passes it."""

        @abstractmethod
        def eager_compute(self, op: str, operands: tuple, node: Any, kind: str) -> Any:
            """The result of an eager operation, recorded where an operand is in host memory."""

        @abstractmethod
        def refused(self, op: str, host: Any, operands: tuple) -> bool:
            """Whether JAX >= 0.7.1 refuses an operation for its operands' memory spaces."""

        @abstractmethod
        def eager_jit_call(self, jitted: Any, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
            """A jitted function called from eager code."""

        @abstractmethod
        def eager_inlines(self, fn: Any, args: list, kwargs: dict) -> bool:
            """Whether a call of a project function is followed (eager code follows fewer)."""


ABSENT: Any = object()
"""An argument the call does not pass."""


def call_argument(args: list, kwargs: dict, position: int, keyword: str, default: Any = ABSENT) -> Any:
    """A parameter's argument, passed by position or by keyword."""
    if len(args) > position:
        return args[position]
    return kwargs.get(keyword, default)
