"""Code outside ``jax.jit``: what JAX does when a program computes eagerly on arrays in host memory.

An eager ``x * 2`` or ``x.reshape(-1)`` compiles one of JAX's own jits around the operation,
and ``run`` analyses that jit like a user's (``interception.CompilationChecker.check_eager``).
The check follows the same arrays through the code that runs outside any jit: each top-level
statement that is not a ``def`` or a class (a script's body, ``if __name__ == "__main__":
main()``), and each test function or method, with the functions they call traced in turn.
A host value starts as in traced code (a ``device_put`` to a host memory kind, a sharding
``with_memory_kind``), and what each operation on one does is decided by the JAX version:

* from 0.7.1 the memory space is part of an array's type. An operation computes on the host
  (OFL1201) and its result stays in host memory; a reshape, a transpose, a plain slice keep
  it there silently. JAX refuses an operation whose operands of one dimension or more are in
  different memory spaces (OFL1215), before anything compiles. A strided slice of a host
  array on one device is the copy every released compiler fails to build (OFL1213). The data
  of one addressable shard (``x.addressable_shards[i].data``) and ``jnp.mean`` give a result
  typed device memory: error 1200 (OFL1200), host compute too where they compute;
* before, JAX declares every eager result device memory: each operation on a host array is
  error 1200 on TPU (OFL1200), and host compute where it computes; the result is device memory.

A jitted function the eager code calls with host arrays is analysed with those arguments, as
JAX traces it with them (committed arrays keep their memory); a plain function is traced.
Where a test of an array's kind (``isinstance(x, jax.Array)``, ``x.sharding.memory_kind ==
"pinned_host"``) guards a branch, the branch knows it (:func:`refined`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import libcst as cst

from offload_fixer.jax_compat import Regime
from offload_fixer.source.bindings import block_statements

from . import names
from .evaluator import Evaluator, Unsupported
from .scopes import Frame
from .values import (
    NOT_ARRAY,
    UNKNOWN,
    Const,
    DeviceArray,
    HostArray,
    HostOrigin,
    Jitted,
    Ref,
    ShardingSpec,
    leaves,
    map_leaves,
)

MAX_EAGER_DEPTH = 4
"""Calls eager code is followed through (a jit's code: :data:`~.evaluator.MAX_CALL_DEPTH`)."""
MAX_EAGER_EVALUATIONS = 20_000
"""Per piece of eager code (a module's statement, a test function) with what it calls: a
script's ``main()`` reaches most of a project, and what it does beyond this is left unread
(a tenth of a jit site's :data:`~.evaluator.MAX_EVALUATIONS`: maxtext's 108 pieces took
three fifths of a check with it)."""
DECLARED_DEVICE = "declared device"
"""An eager result JAX declares device memory while its operand is in host memory: OFL1200."""
COMPUTE = "compute"
"""Host compute: OFL1201."""
MIXED = "mixed"
"""JAX's refusal of operands in different memory spaces (>= 0.7.1): OFL1215."""
STRIDED = "strided slice"
"""A strided slice of a host array copied to device: OFL1213."""

UNCHECKED_SPACES = ("scatter", "at[].")
"""Operations whose memory space is their operand's, never compared with the others' (a
scatter's: ``x.at[i].set(v)``)."""
BROADCAST_SCALARS = frozenset({"where", "select"})
"""Operations that broadcast a Python scalar operand to a device array of the others' shape first
(measured: ``jnp.where(h > 0, h, 0.0)`` of a host ``h`` is refused, ``jnp.maximum(h, 0.0)`` is not)."""
FULL_REDUCTIONS = frozenset(
    "sum prod max min amax amin mean std var median any all argmax argmin norm nansum nanmax nanmin".split()
)
"""Reductions that, given the array alone (no axis), give a scalar."""
MEAN_OPS = frozenset({"mean"})
"""Eager reductions JAX 0.10.2 declares device memory (measured: ``jnp.mean`` of a host array is
error 1200 and host compute on TPU, ``jnp.sum`` host compute only)."""


@dataclass(frozen=True)
class Shards:
    r"""``x.addressable_shards`` of an array: iterated, each item is one of its :class:`Shard`\ s."""

    array: Any


@dataclass(frozen=True)
class Shard:
    """One addressable shard of an array; its ``data`` is that shard's array."""

    array: Any


@dataclass(frozen=True)
class EagerOperation:
    """One eager operation on a host array, and what JAX makes of it (:data:`COMPUTE` ...)."""

    kind: str
    op: str
    node: Any
    host: HostArray


class EagerRunner(Evaluator):
    """Runs the code outside ``jax.jit``; a part of :class:`.interpreter.Interpreter`."""

    regime: Regime
    path: str | None
    """The checked module's absolute path."""
    _eager: list | None
    """The eager operations of the code being run (None: not eager code)."""
    _eager_sites: list
    """The jit sites eager code called with host arrays, analysed with them."""
    _traced: int
    """How many jits called from eager code are being traced: their code is not eager."""
    _silent: int
    """How many module-level bindings are being evaluated for a name eager code reads: their
    operations are that statement's, not this one's."""

    def eager_by_statement(
        self, indices: Iterable[int], tests: Mapping[int, frozenset[str]] | None = None
    ) -> dict[int, tuple[list, list]]:
        """For each top-level statement at ``indices``: the eager operations on host arrays its
        code runs (each :class:`EagerOperation` once), and the jit sites it calls with host arrays.
        ``tests``: of the classes of a statement there, the test methods run (the others no host
        value reaches: :func:`.pruning.reached_tests`); a statement not there runs all of them."""
        found: dict[int, tuple[list, list]] = {}
        for index in indices:
            statement = self.top_statement(index)
            operations: list = []
            sites: list = []
            for body, frame in self._roots(statement, index, None if tests is None else tests.get(index)):
                self._run_root(body, frame, operations, sites)
            unique: dict = {}
            for operation in operations:  # a loop runs its body twice: each operation once
                unique.setdefault((operation.kind, id(operation.node)), operation)
            found[index] = (list(unique.values()), sites)
        return found

    def _roots(self, statement: Any, index: int, tests: frozenset[str] | None) -> list[tuple[list, Frame]]:
        """The code of a top-level statement that runs outside any jit: the statement itself, or
        the test functions and methods it defines (of a class, those named in ``tests`` when
        given), each with the frame it runs in."""
        if isinstance(statement, cst.FunctionDef):
            return [self._test_root(statement)] if _is_test(statement) else []
        if isinstance(statement, cst.ClassDef):
            body = self.class_statements(statement)
            return [
                self._test_root(member)
                for member in body
                if isinstance(member, cst.FunctionDef)
                and _is_test(member)
                and (tests is None or member.name.value in tests)
            ]
        return [([statement], Frame(frozenset(), self.module_scope.at(index)))]

    def _test_root(self, node: cst.FunctionDef) -> tuple[list, Frame]:
        frame = Frame(self.local_names(node), self.module_scope)
        return block_statements(node.body), frame

    def _run_root(self, body: list, frame: Frame, operations: list, sites: list) -> None:
        self._budget = MAX_EAGER_EVALUATIONS
        self._eager, self._eager_sites = operations, sites
        try:
            self.exec_block(body, frame, [])
        except Unsupported:
            pass  # what ran before the check lost track of the code stands
        finally:
            self._eager = None

    @property
    def in_eager_code(self) -> bool:
        return self._eager is not None and not self._traced

    def eager_binding(self, evaluate: Any) -> Any:
        """A module-level binding evaluated for a name the eager code reads: with eager
        semantics, its operations recorded by its own statement's run, not this one."""
        if not self.in_eager_code:
            return evaluate()
        self._silent += 1
        try:
            return evaluate()
        finally:
            self._silent -= 1

    # ------------------------------------------------------------------ operations
    def eager_compute(self, op: str, operands: tuple, node: Any, kind: str) -> Any:
        """The result of an eager operation (``kind`` as :meth:`compute`'s), recording what JAX
        makes of it where an operand is in host memory."""
        host = None
        device = on_device = unknown = shaped = False
        scalars = True
        for operand in operands:
            for leaf in leaves(operand):
                if isinstance(leaf, HostArray):
                    host = host or leaf
                    shaped = shaped or leaf.shaped
                    scalars = scalars and leaf.scalar
                elif isinstance(leaf, DeviceArray):
                    device = device or leaf.shaped
                    on_device = True
                    shaped = shaped or leaf.shaped
                elif not isinstance(leaf, (Const, Ref, ShardingSpec)) and leaf is not NOT_ARRAY:
                    unknown = True
        elementwise = op in _ELEMENTWISE
        if host is None:
            return UNKNOWN if unknown else DeviceArray(True, shaped=shaped and elementwise)
        category = _category(op, kind)
        result_shaped = shaped and (elementwise or kind == "maybe_identity")
        if self.regime is not Regime.TYPED:
            self._record(DECLARED_DEVICE, op, node, host)
            if category == COMPUTE:
                self._record(COMPUTE, op, node, host)
            return DeviceArray(True, shaped=result_shaped)
        if (
            host.shaped
            and (device or (op in BROADCAST_SCALARS and _has_constant(operands)))
            and not op.startswith(UNCHECKED_SPACES)
        ):
            self._record(MIXED, op, node, host)
            return UNKNOWN  # JAX raises: nothing after it runs
        if host.shard or op in MEAN_OPS or (scalars and not on_device):
            # JAX types the result device memory: of a shard's data (typed device), of a mean
            # (its division is of scalars), of scalars alone (their memory is not compared).
            self._record(DECLARED_DEVICE, op, node, host)
            if category == COMPUTE:
                self._record(COMPUTE, op, node, host)
            return DeviceArray(True, shaped=result_shaped)
        if category == COMPUTE:
            self._record(COMPUTE, op, node, host)
        elif kind == STRIDED and host.placement == "single":
            self._record(STRIDED, op, node, host)
        scalar = op in FULL_REDUCTIONS and len(operands) == 1
        return replace(
            host.after(category, op, node), single=True, shard=False, shaped=result_shaped and not scalar, scalar=scalar
        )

    def refused(self, op: str, host: HostArray, operands: tuple) -> bool:
        """Whether JAX >= 0.7.1 refuses ``op`` in traced code: a host operand and a device one,
        both known to have a dimension (scalars are not compared)."""
        if self.regime is not Regime.TYPED or not host.shaped or op.startswith(UNCHECKED_SPACES):
            return False
        return any(isinstance(leaf, DeviceArray) and leaf.shaped for operand in operands for leaf in leaves(operand))

    def _record(self, kind: str, op: str, node: Any, host: HostArray) -> None:
        if self._eager is not None and not self._silent:
            self._eager.append(EagerOperation(kind, op, node, host))

    # ------------------------------------------------------------------ calls
    def eager_inlines(self, fn: Any, args: list, kwargs: dict) -> bool:
        """Whether eager code follows a call of a project function: in traced code always; in
        eager code to :data:`MAX_EAGER_DEPTH` calls, and into another module only with a host
        array, a host sharding or a host memory kind in hand (a script's ``main()`` calls into
        most of its project, which is parsed only where a host value can go)."""
        if not self.in_eager_code:
            return True
        if len(self._stack) >= MAX_EAGER_DEPTH:
            return False
        if getattr(fn.scope, "module_path", None) == self.path:
            return True
        return any(_hosts(leaf) for value in (*args, *kwargs.values()) for leaf in leaves(value))

    def analysed_call(self, jitted: Any, args: list, kwargs: dict, keep: bool) -> Any:
        """A jit site called from eager code with ``args``: its result (and, ``keep``, its
        :class:`SiteResult` first). Committed arguments are traced as they are, unless the
        site declares ``in_shardings``."""
        saved = self.host_computations, self.refusals
        try:
            site, value = self.trace_site(jitted, (args, kwargs))
        finally:
            self.host_computations, self.refusals = saved
        return (site, value) if keep else value

    def eager_jit_call(self, jitted: Jitted, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        """A jitted function called from eager code: traced with the arguments it is given
        (committed arrays keep their memory), its findings those of a site; the result, what
        the version makes of its outputs (from 0.7.1 they keep their memory; before, they
        are device memory unless ``out_shardings`` says otherwise)."""
        if not any(isinstance(leaf, HostArray) for a in (*args, *kwargs.values()) for leaf in leaves(a)):
            self._traced += 1
            try:
                return self.analysed_call(jitted, args, kwargs, keep=False)
            finally:
                self._traced -= 1
        self._traced += 1
        try:
            site, value = self.analysed_call(jitted, args, kwargs, keep=True)
        finally:
            self._traced -= 1
        if site is not None and not self._silent:
            self._eager_sites.append(site)
        if self.regime is Regime.TYPED:
            return value
        return map_leaves(value, lambda leaf: DeviceArray(True) if isinstance(leaf, HostArray) else leaf)


def shard_data(array: Any) -> Any:
    """The data of one addressable shard of ``array``: of a host array, host data that JAX
    >= 0.7.1 types device memory where the array spans devices (:mod:`.eager`); an array on
    one device is its own shard."""
    if isinstance(array, HostArray):
        return replace(array, single=True, shard=array.placement != "single")
    return DeviceArray(True) if isinstance(array, DeviceArray) else UNKNOWN


def strided_index(node: cst.Subscript, scope: Any, interp: Any) -> bool:
    """Whether an index slices with a constant step other than 1 (``x[::2]``, ``x[:, 1::2]``)."""
    for element in node.slice:
        part = element.slice
        if isinstance(part, cst.Slice) and part.step is not None:
            step = interp.ev(part.step, scope)
            if isinstance(step, Const) and isinstance(step.value, int) and step.value not in (1, None):
                return True
    return False


def refined(test: Any, evaluate: Any, lookup: Any) -> tuple[dict, dict]:
    """What a test of an array's kind tells each branch of an ``if``: the names it makes known
    in the branch where it holds, and in the other. ``isinstance(x, jax.Array)`` false: ``x``
    is no array (:data:`~.values.NOT_ARRAY`); ``x.sharding.memory_kind == "pinned_host"`` (or
    ``x.memory_kind``) true: ``x`` is in host memory, as assumed from the test. Only a name the
    check knows nothing of, or knows to be a device array, is refined. ``evaluate`` evaluates an
    expression, ``lookup`` a name."""
    negated = False
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negated = test.expression, not negated
    when_true: dict = {}
    when_false: dict = {}
    if (
        isinstance(test, cst.Call)
        and isinstance(test.func, cst.Name)
        and test.func.value == "isinstance"
        and len(test.args) == 2
        and isinstance(test.args[0].value, cst.Name)
        and _refinable(lookup(test.args[0].value.value))
    ):
        kind = evaluate(test.args[1].value)
        if isinstance(kind, Ref) and kind.qualname in names.ARRAY_TYPES:
            when_false[test.args[0].value.value] = NOT_ARRAY
    elif isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        equal = isinstance(comparison.operator, cst.Equal)
        if equal or isinstance(comparison.operator, cst.NotEqual):
            for subject, other in ((test.left, comparison.comparator), (comparison.comparator, test.left)):
                name = _kind_of_name(subject)
                kind = evaluate(other)
                if name is not None and _refinable(lookup(name)) and _host_kind(kind):
                    origin = HostOrigin(
                        "move_to_host", kind.value, test, f"tested to be in {kind.value} memory", assumed=True
                    )
                    host = HostArray(origin, single=False)
                    (when_true if equal else when_false)[name] = host
                    break
    return (when_false, when_true) if negated else (when_true, when_false)


def _hosts(leaf: Any) -> bool:
    """A host array, a sharding in host memory, or a host memory kind's name."""
    if isinstance(leaf, HostArray):
        return True
    if isinstance(leaf, ShardingSpec):
        return leaf.memory_kind in names.HOST_KINDS
    return _host_kind(leaf)


def _refinable(value: Any) -> bool:
    """A value a test of its kind may tell more of: unknown, or a device array (a branch where
    the test says otherwise is one the program never takes with it)."""
    return value is UNKNOWN or isinstance(value, DeviceArray)


def _has_constant(operands: tuple) -> bool:
    return any(isinstance(leaf, Const) for operand in operands for leaf in leaves(operand))


def _kind_of_name(node: Any) -> str | None:
    """``name`` of ``name.sharding.memory_kind`` or ``name.memory_kind`` (a sharding's)."""
    if not (isinstance(node, cst.Attribute) and node.attr.value == "memory_kind"):
        return None
    base = node.value
    if isinstance(base, cst.Attribute) and base.attr.value == "sharding":
        base = base.value
    return base.value if isinstance(base, cst.Name) else None


def _host_kind(value: Any) -> bool:
    return isinstance(value, Const) and value.value in names.HOST_KINDS


def expects_exception(node: Any) -> bool:
    """A test's context manager that expects its body to raise: ``pytest.raises(...)``,
    ``self.assertRaises(...)``, ``self.assertRaisesRegex(...)``."""
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return name in _EXPECTS_RAISE


_EXPECTS_RAISE = frozenset({"raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "assert_raises"})


def _is_test(node: cst.FunctionDef) -> bool:
    """A test function or method, which a test runner calls outside any jit."""
    return node.name.value.startswith("test") and node.asynchronous is None


def _category(op: str, kind: str) -> str:
    if kind == "maybe_identity" or kind in names.MAYBE_IDENTITY:
        return "maybe_identity"
    if kind in ("slice", STRIDED):
        return "slice"
    return COMPUTE


_ELEMENTWISE = frozenset(
    """add subtract multiply divide floor_divide remainder power and or xor shift_left shift_right
    negate plus not compare maximum minimum where tanh exp log sin cos sqrt abs square sign""".split()
)
"""Operations whose result has the shape of their operands (broadcast): a result of one that has
a dimension has one too."""
