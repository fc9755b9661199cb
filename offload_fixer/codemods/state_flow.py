"""Whether a returned value is the updated state of a streamed argument, read from the source.

``run`` compares tensor types: an output of the host argument's type gives the state back, and
the fix keeps it host memory. A source check has no types, so it follows how the value is made:

* ``state``: the argument (a sub-tree or leaf of it) or something of its exact type: the carry of
  a ``while_loop``/``fori_loop``/``scan`` whose init is it (JAX keeps a carry's type), a
  ``cond``/``select`` with a branch that is it (the branches share one type), an elementwise op
  with scalars or values shaped like it (``zeros_like``, a same-named leaf of a ``tree.map``),
  ``.at[...].set``, ``dynamic_update_slice``, a ``tree.map`` over it;
* ``derived``: an elementwise op of it and an operand of unknown shape (``w - lr * g``), which
  broadcasting may make larger: the state only where the program says so, by rebinding the
  argument's name (``w = w - lr * g``) or by returning it where the state's keys are;
* ``new``: a reduction, contraction, slice or index of it (``jnp.mean``, ``x @ w``, ``w[0]``), or
  a loop carry the body makes so (``tanh(h @ w)``): a new value, never the state;
* ``other``: made only from other arguments and constants, so not the state either;
* ``scalar``, ``peer`` (shaped like the state: ``zeros_like(w)``), ``unknown`` (a call the source
  does not show, a cast, a name bound in a way not followed).

Over 500 lines on purpose: one classification, case by case over the expression forms JAX code
uses, that every case shares through one walker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import libcst as cst

from offload_fixer.codemods.pytree_source import child_at
from offload_fixer.codemods.sharding_exprs import string_value
from offload_fixer.codemods.source_facts import FunctionInfo, Scope, SourceFacts
from offload_fixer.model import PathKey
from offload_fixer.source.bindings import Binding

Keys = tuple[PathKey, ...]


@dataclass(frozen=True)
class Flow:
    kind: str
    """``state``, ``derived``, ``new``, ``other``, ``scalar``, ``peer`` or ``unknown``."""
    path: Keys = ()
    """For ``state`` and ``derived``: the sub-tree of the argument it is made from."""


UNKNOWN = Flow("unknown")
OTHER = Flow("other")
SCALAR = Flow("scalar")
NEW = Flow("new")

_ELEMENTWISE = frozenset(
    [
        f"jax.numpy.{n}"
        for n in """abs absolute negative positive exp exp2 expm1 log log1p log2 log10 sqrt cbrt square
        reciprocal sin cos tan sinh cosh tanh arctan sign floor ceil round clip maximum minimum add subtract
        multiply divide true_divide power fmax fmin nan_to_num where""".split()
    ]
    + [
        f"jax.nn.{n}"
        for n in "relu relu6 gelu silu swish sigmoid softplus elu celu selu leaky_relu hard_tanh softmax log_softmax".split()
    ]
    + [
        f"jax.lax.{n}"
        for n in "stop_gradient add sub mul div max min neg abs exp log log1p sqrt rsqrt tanh logistic clamp".split()
    ]
)
"""Functions whose result has the broadcast shape of their array operands and, for float
operands, their dtype."""
_SAME_TYPE_AS_FIRST = frozenset(
    [f"jax.lax.{n}" for n in "dynamic_update_slice dynamic_update_slice_in_dim dynamic_update_index_in_dim".split()]
)
_SLICES = frozenset(
    f"jax.lax.{n}"
    for n in "slice slice_in_dim dynamic_slice dynamic_slice_in_dim dynamic_index_in_dim index_in_dim".split()
)
_TRACING = frozenset({"jax.vmap", "jax.checkpoint", "jax.remat", "jax.jit"})
_LIKE = frozenset(f"jax.numpy.{n}" for n in "zeros_like ones_like full_like empty_like".split())
_REDUCTIONS = frozenset(
    [
        f"jax.numpy.{n}"
        for n in "sum mean max min prod std var amax amin argmax argmin any all median nansum nanmean linalg.norm".split()
    ]
    + [f"jax.lax.{n}" for n in "reduce_sum reduce_max reduce_min reduce_prod".split()]
    + ["jax.nn.logsumexp"]
)
_CONTRACTIONS = frozenset(
    [f"jax.numpy.{n}" for n in "dot vdot inner outer matmul tensordot einsum".split()]
    + [f"jax.lax.{n}" for n in "dot dot_general".split()]
)
"""Reductions and contractions make a new value, never an update of the state (without
``keepdims``)."""
_REDUCING_METHODS = frozenset("sum mean max min prod std var argmax argmin any all dot".split())
_TREE_MAPS = frozenset({"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map"})
_LOOPS = {"jax.lax.while_loop": 2, "jax.lax.fori_loop": 3}
"""Loops whose result is their carry: the index of the init argument (``scan``'s is ``[0]``)."""
_ARITHMETIC = (
    cst.Add,
    cst.Subtract,
    cst.Multiply,
    cst.Divide,
    cst.FloorDivide,
    cst.Modulo,
    cst.Power,
)


class StateFlow:
    """Classifies expressions of one function against one of its parameters."""

    def __init__(self, facts: SourceFacts, parameter: str, leaves: Sequence[Keys]) -> None:
        self.facts = facts
        self.parameter = parameter
        self.leaves = [tuple(leaf) for leaf in leaves] or [()]
        self._depth = 0

    # ------------------------------------------------------------------ entry
    def at(self, scope: Scope, expr: cst.BaseExpression) -> Flow:
        return self.flow(expr, scope, {})

    def is_leaf(self, path: Keys) -> bool:
        return path in self.leaves

    def _inside(self, path: Keys) -> bool:
        """A sub-tree of the argument that holds some of its host leaves."""
        return any(leaf[: len(path)] == path for leaf in self.leaves)

    # ------------------------------------------------------------------ expressions
    def flow(self, expr: cst.BaseExpression, scope: Scope, env: Mapping[str, Flow], limit: int | None = None) -> Flow:
        if self._depth > 40:
            return UNKNOWN
        self._depth += 1
        try:
            return self._flow(expr, scope, env, limit)
        finally:
            self._depth -= 1

    def _flow(self, expr: cst.BaseExpression, scope: Scope, env: Mapping[str, Flow], limit: int | None) -> Flow:
        if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary)):
            return SCALAR
        if isinstance(expr, cst.Name):
            return self._name(expr.value, scope, env, limit)
        if isinstance(expr, cst.UnaryOperation):
            inner = self.flow(expr.expression, scope, env)
            return inner if not isinstance(expr.operator, cst.Not) else UNKNOWN
        if isinstance(expr, cst.BinaryOperation):
            left, right = self.flow(expr.left, scope, env), self.flow(expr.right, scope, env)
            if isinstance(expr.operator, cst.MatrixMultiply):
                return _contracted(left, right)
            if isinstance(expr.operator, _ARITHMETIC):
                return _elementwise([left, right])
            return UNKNOWN
        if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
            return _elementwise(
                [self.flow(expr.left, scope, env), self.flow(expr.comparisons[0].comparator, scope, env)]
            )
        if isinstance(expr, cst.Subscript):
            return self._subscript(expr, scope, env)
        if isinstance(expr, cst.Attribute):
            inner = self.flow(expr.value, scope, env)
            if inner.kind in ("state", "derived") and not self.is_leaf(inner.path):
                path = (*inner.path, ("attr", expr.attr.value))
                return Flow(inner.kind, path) if self._inside(path) else OTHER
            return UNKNOWN if inner.kind in ("state", "derived", "new") else OTHER
        if isinstance(expr, cst.Call):
            return self._call(expr, scope, env)
        return UNKNOWN

    def _name(self, name: str, scope: Scope, env: Mapping[str, Flow], limit: int | None) -> Flow:
        if name in env:
            return env[name]
        bindings = scope.bindings.get(name)
        if bindings is None:
            found = self.facts.scope_chain_binding(name, scope)
            if found is None:
                return UNKNOWN
            binding, where = found
            value = binding.value
            return self.flow(value, where, {}) if value is not None and _is_scalar(value) else OTHER
        visible = bindings[:limit] if limit is not None else bindings
        if not visible or any(b.kind not in ("assign", "parameter", "other") for b in visible):
            return UNKNOWN
        if not any(b.nested for b in visible):
            return self._binding(name, visible[-1], len(visible) - 1, scope, env)
        # bound in a loop or a branch: any of its values may be the one returned
        flows = [self._binding(name, b, i, scope, env) for i, b in enumerate(visible)]
        if all(f.kind in ("new", "other") for f in flows):
            return NEW if any(f.kind == "new" for f in flows) else OTHER
        return UNKNOWN

    def _binding(self, name: str, binding: Binding, index: int, scope: Scope, env: Mapping[str, Flow]) -> Flow:
        """The value binding ``index`` of ``name`` gives it; inside it, ``name`` reads the value
        it had before (``p = p - lr * g``: an elementwise update under the same name is the state)."""
        if binding.kind == "parameter":
            return self._parameter(name)
        before = self._name(name, scope, env, index) if index else UNKNOWN
        inner = {**env, name: before}
        if binding.kind == "assign":
            assert binding.value is not None
            found = self.flow(binding.value, scope, inner)
            if found.kind == "derived" and before.kind in ("state", "derived") and before.path == found.path:
                return Flow("state", found.path)
            return found
        statement = binding.node
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
            target = statement.targets[0].target
            if isinstance(target, (cst.Tuple, cst.List)):
                names = [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]
                if name in names and not any(isinstance(e, cst.StarredElement) for e in target.elements):
                    element = cst.Subscript(
                        statement.value, [cst.SubscriptElement(cst.Index(cst.Integer(str(names.index(name)))))]
                    )
                    return self.flow(element, scope, inner)
        if isinstance(statement, cst.For) and isinstance(statement.target, cst.Name):
            rows = self.flow(statement.iter, scope, inner)
            if rows.kind in ("state", "derived", "new"):
                return NEW if rows.kind == "new" or self.is_leaf(rows.path) else UNKNOWN  # a row of an array
            return OTHER if rows.kind == "other" else UNKNOWN
        return UNKNOWN

    def _parameter(self, name: str) -> Flow:
        return Flow("state") if name == self.parameter else OTHER

    def _subscript(self, expr: cst.Subscript, scope: Scope, env: Mapping[str, Flow]) -> Flow:
        key = _key(expr)
        carried = self._carried(expr.value, scope)
        if key is not None and carried is not None:
            child = child_at(carried, key)
            if child is not None:
                return self.flow(child, scope, env)
        value = expr.value
        if isinstance(value, cst.Attribute) and value.attr.value == "at":
            return UNKNOWN  # ``x.at[i]`` alone is not an array
        if key == ("index", 0) and isinstance(value, cst.Call) and self._qualname(value.func) == "jax.lax.scan":
            return self._loop(value, "jax.lax.scan", scope, env)
        inner = self.flow(value, scope, env)
        if inner.kind not in ("state", "derived", "new"):
            return OTHER if inner.kind in ("other", "scalar") and _static_index(expr) else UNKNOWN
        if inner.kind == "new":
            return NEW
        if key is not None and not self.is_leaf(inner.path):
            path = (*inner.path, key)
            return Flow(inner.kind, path) if self._inside(path) else OTHER
        if _whole_slice(expr):
            return inner
        return NEW if self.is_leaf(inner.path) else UNKNOWN  # an index of an array: a slice of it

    def _carried(self, expr: cst.BaseExpression, scope: Scope) -> cst.BaseExpression | None:
        """The literal a local name or a loop's init holds (``while_loop(c, b, (0, s))``), where
        the loop's carry is that literal's structure."""
        for _ in range(8):
            if isinstance(expr, (cst.Tuple, cst.List, cst.Dict)):
                return expr
            if isinstance(expr, cst.Name) and expr.value != self.parameter:
                binding = scope.single_value(expr.value)
                if binding is None or binding.nested or binding.value is None:
                    return None
                expr = binding.value
                continue
            if isinstance(expr, cst.Call) and self._qualname(expr.func) in _LOOPS:
                name = self._qualname(expr.func)
                init = _argument(expr, _LOOPS[name], "init_val")
                if init is None:
                    return None
                expr = init
                continue
            return None
        return None

    def _qualname(self, func: cst.BaseExpression) -> str:
        return self.facts.aliases.qualify(func) or ""

    def _loop(self, call: cst.Call, name: str, scope: Scope, env: Mapping[str, Flow]) -> Flow:
        """A loop's carry: of the init's type, so the state where the init is; else what the
        body makes of it (``tanh(h @ w)``: a new value)."""
        if name == "jax.lax.scan":
            body, init, given, element = _argument(call, 0, "f"), _argument(call, 1, "init"), 1, 0
        elif name == "jax.lax.while_loop":
            body, init, given, element = _argument(call, 1, "body_fun"), _argument(call, 2, "init_val"), 0, None
        else:
            body, init, given, element = _argument(call, 2, "body_fun"), _argument(call, 3, "init_val"), 1, None
        if body is None or init is None:
            return UNKNOWN
        start = self.flow(init, scope, env)
        if start.kind == "state":
            return start
        if start.kind not in ("new", "other"):
            return UNKNOWN
        arguments = [SCALAR, start] if name == "jax.lax.fori_loop" else [start, UNKNOWN][: given + 1]
        step = self._applied(body, arguments, scope, env, element)
        if step.kind in ("new", "other"):
            return NEW if "new" in (start.kind, step.kind) else OTHER
        return UNKNOWN

    def _call(self, call: cst.Call, scope: Scope, env: Mapping[str, Flow]) -> Flow:
        if any(a.star for a in call.args):
            return UNKNOWN
        name = self._qualname(call.func)
        positional = [a.value for a in call.args if a.keyword is None]
        if name in _LOOPS:
            return self._loop(call, name, scope, env)
        if name in ("jax.lax.cond", "jax.lax.switch"):
            return self._branches(call, name, scope, env)
        if name == "jax.lax.select" and len(positional) == 3:
            # no broadcasting: the result has the branches' type
            return _branch_type([self.flow(p, scope, env) for p in positional[1:]])
        if name in _TREE_MAPS and positional:
            return self._tree_map(positional[0], positional[1:], scope, env)
        if name in _LIKE and positional:
            inner = self.flow(positional[0], scope, env)
            if inner.kind in ("state", "peer") and len(positional) <= 2 and not _has(call, "dtype", "shape"):
                return Flow("peer")
            return OTHER if inner.kind in ("other", "scalar") else UNKNOWN
        args = [self.flow(p, scope, env) for p in positional]
        if name in _SAME_TYPE_AS_FIRST and args:
            return args[0] if args[0].kind in ("state", "derived", "other") else UNKNOWN
        if name in _SLICES and args:
            return _sliced(args[0])
        if name in _ELEMENTWISE and args and not _has(call, "dtype"):
            return _elementwise(args)
        if name in _CONTRACTIONS and args:
            return _contracted(*args)
        if name in _REDUCTIONS and args:
            return UNKNOWN if _has(call, "keepdims") else _reduced(args, bool(_has(call, "axis") or len(args) > 1))
        if isinstance(call.func, cst.Call) and self._qualname(call.func.func) in _TRACING:
            # ``jax.vmap(f)(w, x)``, ``jax.checkpoint(f)(w, x)``
            inner_fn = _argument(call.func, 0, "fun")
            found = self._applied(inner_fn, args, scope, env) if inner_fn is not None else UNKNOWN
            if self._qualname(call.func.func) == "jax.vmap":
                return NEW if found.kind == "new" else UNKNOWN  # batched: a new value stays one
            return found
        if isinstance(call.func, cst.Attribute) and not name.startswith("jax."):
            return self._method(call, scope, env)
        if (
            isinstance(call.func, cst.Name)
            and self._local_def(call.func, scope) is not None
            and not _has_keywords(call)
        ):
            return self._applied(call.func, args, scope, env)
        return UNKNOWN

    def _method(self, call: cst.Call, scope: Scope, env: Mapping[str, Flow]) -> Flow:
        func = call.func
        assert isinstance(func, cst.Attribute)
        method = func.attr.value
        owner = func.value
        if (
            isinstance(owner, cst.Subscript)
            and isinstance(owner.value, cst.Attribute)
            and owner.value.attr.value == "at"
        ):
            if method in ("set", "add", "subtract", "multiply", "divide", "min", "max", "power"):
                inner = self.flow(owner.value.value, scope, env)
                return inner if inner.kind in ("state", "derived", "other") else UNKNOWN  # ``x.at[i].set(v)``
            return UNKNOWN
        inner = self.flow(owner, scope, env)
        if method in _REDUCING_METHODS:
            return UNKNOWN if _has(call, "keepdims") else _reduced([inner], bool(call.args))
        return UNKNOWN

    def _branches(self, call: cst.Call, name: str, scope: Scope, env: Mapping[str, Flow]) -> Flow:
        positional = [a.value for a in call.args if a.keyword is None]
        if name == "jax.lax.cond":
            functions, operands = positional[1:3], positional[3:]
        else:
            listed = positional[1] if len(positional) > 1 else None
            if not isinstance(listed, (cst.List, cst.Tuple)):
                return UNKNOWN
            functions, operands = [e.value for e in listed.elements], positional[2:]
        given = [self.flow(o, scope, env) for o in operands]
        results = [self._applied(f, given, scope, env) for f in functions]
        return _branch_type(results) if results else UNKNOWN

    def _tree_map(
        self, function: cst.BaseExpression, trees: Sequence[cst.BaseExpression], scope: Scope, env: Mapping[str, Flow]
    ) -> Flow:
        """``tree.map(f, state, *same_structure)``: the state's structure; the state again where
        ``f`` updates its first leaf elementwise (the other leaves are the same-named ones)."""
        tree = self.flow(trees[0], scope, env) if trees else UNKNOWN
        if tree.kind not in ("state", "derived"):
            return UNKNOWN
        leaf = self._applied(function, [Flow("state"), *[Flow("peer")] * (len(trees) - 1)], scope, env)
        if leaf.kind in ("state", "derived") and leaf.path == ():
            return Flow("state", tree.path)
        return NEW if leaf.kind == "new" else UNKNOWN

    def _applied(
        self,
        function: cst.BaseExpression,
        given: Sequence[Flow],
        scope: Scope,
        env: Mapping[str, Flow],
        element: int | None = None,
    ) -> Flow:
        """What ``function`` returns (its ``element``-th item) called with values of these flows:
        a lambda, a local ``def`` with one return, a jnp/nn function applied elementwise."""
        if isinstance(function, cst.Lambda):
            names = [p.name.value for p in function.params.params]
            if len(names) != len(given) or _starred(function.params):
                return UNKNOWN
            return self._item(function.body, element, scope, {**env, **dict(zip(names, given))})
        if self._qualname(function) in _ELEMENTWISE and len(given) == 1 and element is None:
            return _elementwise(list(given))
        defined = self._local_def(function, scope)
        if defined is None or len(defined.returns) != 1 or _starred(defined.node.params):
            return UNKNOWN
        value = defined.returns[0].node.value
        names = [p.name.value for p in defined.node.params.params]
        if value is None or len(names) != len(given):
            return UNKNOWN
        return _Bound(self, dict(zip(names, given)))._item(value, element, defined.scope, {})

    def _item(self, value: cst.BaseExpression, element: int | None, scope: Scope, env: Mapping[str, Flow]) -> Flow:
        if element is None:
            return self.flow(value, scope, env)
        carried = self._carried(value, scope)
        child = child_at(carried, ("index", element)) if carried is not None else None
        return self.flow(child, scope, env) if child is not None else UNKNOWN

    def _local_def(self, function: cst.BaseExpression, scope: Scope) -> FunctionInfo | None:
        """The ``def`` a name calls, undecorated or under ``jax.jit``/``checkpoint`` (which trace
        it as written)."""
        if not isinstance(function, cst.Name):
            return None
        current: Scope | None = scope
        while current is not None and function.value not in current.bindings:
            current = current.parent
        found = current.bindings[function.value] if current is not None else []
        if len(found) != 1 or found[0].kind != "def":
            return None
        node = found[0].node
        if not isinstance(node, cst.FunctionDef) or any(
            self._qualname(d.decorator) not in _TRACING - {"jax.vmap"} for d in node.decorators
        ):
            return None
        return next((f for f in self.facts.functions if f.node is node), None)


class _Bound(StateFlow):
    """Inside a local function: its parameters hold the given flows."""

    def __init__(self, outer: StateFlow, bound: Mapping[str, Flow]) -> None:
        super().__init__(outer.facts, "", outer.leaves)
        self._bound = dict(bound)

    def _parameter(self, name: str) -> Flow:
        return self._bound.get(name, OTHER)


# ---------------------------------------------------------------------------------------
def _elementwise(flows: Sequence[Flow]) -> Flow:
    """An elementwise op of these operands (broadcast together)."""
    kinds = {f.kind for f in flows}
    if "unknown" in kinds:
        return UNKNOWN
    paths = {f.path for f in flows if f.kind in ("state", "derived")}
    if len(paths) > 1:
        return UNKNOWN
    if "state" in kinds or "derived" in kinds:
        if "new" in kinds:
            return UNKNOWN
        (path,) = paths
        exact = kinds <= {"state", "scalar", "peer"}
        return Flow("state" if exact else "derived", path)
    if "new" in kinds:
        return NEW
    if "other" in kinds:
        return OTHER
    return Flow("peer") if "peer" in kinds else SCALAR


def _contracted(*flows: Flow) -> Flow:
    """A contraction (``x @ w``): a new value unless every operand is known not to be the state."""
    kinds = {f.kind for f in flows}
    return OTHER if kinds <= {"other", "scalar"} else NEW


def _reduced(flows: Sequence[Flow], partial: bool) -> Flow:
    """A reduction: a new value; of values not made from the state, over every axis, a scalar."""
    kinds = {f.kind for f in flows}
    if kinds <= {"other", "scalar"}:
        return OTHER if partial else SCALAR
    return NEW


def _sliced(flow: Flow) -> Flow:
    if flow.kind in ("state", "derived", "new"):
        return NEW
    return OTHER if flow.kind in ("other", "scalar") else UNKNOWN


def _branch_type(results: Sequence[Flow]) -> Flow:
    """Branches of one type (``cond``, ``select``): the state if any branch is exactly it."""
    exact = {r.path for r in results if r.kind == "state"}
    if len(exact) == 1:
        return Flow("state", exact.pop())
    kinds = {r.kind for r in results}
    if kinds == {"new"}:
        return NEW
    derived = {r.path for r in results if r.kind == "derived"}
    if len(derived) == 1 and kinds <= {"derived", "peer", "scalar"}:
        return Flow("derived", derived.pop())
    return OTHER if kinds <= {"other", "scalar"} else UNKNOWN


def _static_index(expr: cst.Subscript) -> bool:
    return all(isinstance(e.slice, (cst.Index, cst.Slice)) for e in expr.slice)


def _has_keywords(call: cst.Call) -> bool:
    return any(a.keyword is not None for a in call.args)


def _is_scalar(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return _is_scalar(expr.expression)
    if isinstance(expr, cst.BinaryOperation):
        return _is_scalar(expr.left) and _is_scalar(expr.right)
    return False


def _key(expr: cst.Subscript) -> PathKey | None:
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    value = expr.slice[0].slice.value
    if isinstance(value, cst.Integer):
        number = value.evaluated_value
        return ("index", number) if isinstance(number, int) else None
    text = string_value(value)
    return ("key", text) if text is not None else None


def _whole_slice(expr: cst.Subscript) -> bool:
    """``x[:]`` or ``x[...]``."""
    if len(expr.slice) != 1:
        return False
    part = expr.slice[0].slice
    if isinstance(part, cst.Slice):
        return part.lower is None and part.upper is None and part.step is None
    return isinstance(part, cst.Index) and isinstance(part.value, cst.Ellipsis)


def _argument(call: cst.Call, index: int, keyword: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    return positional[index] if index < len(positional) else None


def _has(call: cst.Call, *keywords: str) -> bool:
    return any(a.keyword is not None and a.keyword.value in keywords for a in call.args)


def _starred(params: cst.Parameters) -> bool:
    """``*args``, a bare ``*`` or keyword-only parameters: calls do not bind by position alone."""
    return isinstance(params.star_arg, (cst.Param, cst.ParamStar)) or bool(params.kwonly_params)
