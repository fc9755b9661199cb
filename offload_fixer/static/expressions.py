"""Evaluating expressions, calls included, to abstract values.

Names, literals, attributes, subscripts, pytree literals, operators and calls each have an
evaluator (:data:`_DISPATCH`, by exact node type). A call of a function of the project is
traced (inlined, as JAX tracing inlines Python calls); a call of a named JAX API is what
:mod:`.jax_api` says it does. :class:`ExpressionEvaluator` is a part of
:class:`.interpreter.Interpreter`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import libcst as cst

from offload_fixer.source.bindings import target_names

from . import iteration, jax_api, names
from .eager import Shard, Shards, shard_data, strided_index
from .evaluator import Evaluator, Unsupported
from .scopes import Frame
from .statements import conditional, truth
from .syntax import index_parts, literal_value, whole_axis
from .values import (
    DEVICE_LEAF,
    NONE,
    STATIC,
    UNKNOWN,
    AtIndexed,
    AtIndexer,
    Bound,
    Const,
    DataclassType,
    DeviceArray,
    DeviceList,
    DeviceRef,
    Differentiated,
    Function,
    HostArray,
    Instance,
    JitFactory,
    Jitted,
    Mapping,
    Optimizer,
    ProjectModule,
    Ref,
    ReplaceMethod,
    Seq,
    ShardingSpec,
    Transform,
    TransformFactory,
    join,
    join_branches,
    leaves,
)

_OPERATOR_NAMES = {
    "Add": "add",
    "Subtract": "subtract",
    "Multiply": "multiply",
    "Divide": "divide",
    "FloorDivide": "floor_divide",
    "Modulo": "remainder",
    "Power": "power",
    "MatrixMultiply": "matmul",
    "BitAnd": "and",
    "BitOr": "or",
    "BitXor": "xor",
    "LeftShift": "shift_left",
    "RightShift": "shift_right",
    "Minus": "negate",
    "Plus": "plus",
    "BitInvert": "not",
}
_PYTHON_COMPARISONS = (cst.Is, cst.IsNot, cst.In, cst.NotIn)
_MEMORY_OPS = frozenset(
    {"at[].set", "at[].get", "dynamic_update_slice", "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim"}
)
"""Updates of a host buffer and reads from one: XLA does them as dynamic-update-slices and
slices (memory transfers), not as host compute; slices are their own category. ``at[].set``
is one only at constant indices (:func:`_at_op`)."""
_MAX_HOST_COMPUTATIONS = 64


class ExpressionEvaluator(Evaluator):
    """``ev``, ``apply`` and ``compute`` (the statements and the jit sites are the interpreter's)."""

    def ev(self, node: Any, scope: Any) -> Any:
        self._budget -= 1
        if self._budget < 0:
            raise Unsupported("evaluation budget exhausted")
        method = _DISPATCH.get(type(node))
        if method is None:
            if isinstance(node, (cst.Yield, cst.Await)):
                raise Unsupported(type(node).__name__)
            return UNKNOWN
        return method(self, node, scope)

    def _ev_name(self, node: cst.Name, scope: Any) -> Any:
        value = node.value
        if value == "None":
            return NONE
        if value in ("True", "False"):
            return Const(value == "True")
        return scope.lookup(value)

    def _ev_literal(self, node: Any, scope: Any) -> Any:
        return Const(literal_value(node.value))

    def _ev_attribute(self, node: cst.Attribute, scope: Any) -> Any:
        return self.attribute_of(self.ev(node.value, scope), node.attr.value, node)

    def attribute_of(self, base: Any, attr: str, node: Any) -> Any:
        """``base.attr`` (also ``getattr(base, "attr")``), written at ``node``."""
        if isinstance(base, Ref):
            return Ref(f"{base.qualname}.{attr}")
        if isinstance(base, ProjectModule):
            return self.module_attribute(base, attr)
        if isinstance(base, Instance):
            found = base.get(attr)
            return self.instance_member(base, attr, node) if found is None else found
        if isinstance(base, Shard) and attr == "data":
            return shard_data(base.array)
        if isinstance(base, (HostArray, DeviceArray)):
            if attr in names.ARRAY_ATTRIBUTES:
                return self.compute(attr, (base,), node, f"attribute.{attr}")
            if attr == "at":
                return AtIndexer(base)
            if attr in ("shape", "ndim", "size", "dtype"):
                return STATIC
            if attr in ("addressable_shards", "global_shards"):
                return Shards(base)
            if not base.single and attr not in names.ARRAY_PROPERTIES:
                return base  # a pytree node's field (``state.params``): a subtree in the same memory
        return UNKNOWN

    def _ev_subscript(self, node: cst.Subscript, scope: Any) -> Any:
        base = self.ev(node.value, scope)
        if isinstance(base, DeviceList):
            return DeviceRef()
        if isinstance(base, (Seq, Mapping)):
            key = self.constant_index(node, scope)
            if key is None:
                return UNKNOWN
            if isinstance(base, Mapping):
                item = base.get(key.value)
                return UNKNOWN if item is None else item
            if (
                isinstance(key.value, int)
                and not isinstance(key.value, bool)
                and -len(base.items) <= key.value < len(base.items)
            ):
                return base.items[key.value]
            return UNKNOWN
        if isinstance(base, (HostArray, DeviceArray)) and not base.single:
            key = self.constant_index(node, scope)
            if key is not None and isinstance(key.value, str):
                return base  # a subtree of a pytree whose leaves are all in one memory
        if isinstance(base, (HostArray, DeviceArray, AtIndexer)):
            operands = tuple(self.ev(part, scope) for part in index_parts(node))
            if isinstance(base, AtIndexer):
                return AtIndexed(base.base, operands)
            trivial = all(whole_axis(element.slice) for element in node.slice)
            kind = "maybe_identity" if trivial else "strided slice" if strided_index(node, scope, self) else "slice"
            return self.compute("index", (base, *operands), node, kind)
        if isinstance(base, Shards):
            return Shard(base.array)
        return UNKNOWN

    def constant_index(self, node: cst.Subscript, scope: Any) -> Const | None:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return None
        key = self.ev(node.slice[0].slice.value, scope)
        return key if isinstance(key, Const) and isinstance(key.value, (int, str)) else None

    def _ev_tuple(self, node: Any, scope: Any) -> Any:
        items: list = []
        for element in node.elements:
            value = self.ev(element.value, scope)
            if isinstance(element, cst.StarredElement):
                if not isinstance(value, Seq):
                    return UNKNOWN
                items.extend(value.items)
            else:
                items.append(value)
        return Seq(tuple(items), isinstance(node, cst.List))

    def _ev_dict(self, node: cst.Dict, scope: Any) -> Any:
        items: list = []
        for element in node.elements:
            if isinstance(element, cst.StarredDictElement):
                value = self.ev(element.value, scope)
                if not isinstance(value, Mapping):
                    return UNKNOWN
                items.extend(value.items)
                continue
            key = self.ev(cast(cst.DictElement, element).key, scope)
            if not isinstance(key, Const):
                return UNKNOWN
            items = [(k, v) for k, v in items if k != key.value]
            items.append((key.value, self.ev(element.value, scope)))
        return Mapping(tuple(items))

    def _ev_binary(self, node: cst.BinaryOperation, scope: Any) -> Any:
        return self.binary(self.ev(node.left, scope), node.operator, self.ev(node.right, scope), node)

    def binary(self, left: Any, operator: Any, right: Any, node: Any) -> Any:
        if isinstance(left, Seq) and isinstance(right, Seq) and isinstance(operator, (cst.Add, cst.AddAssign)):
            return Seq(left.items + right.items, left.is_list)
        if isinstance(left, (Seq, Mapping)) or isinstance(right, (Seq, Mapping)):
            return UNKNOWN
        if isinstance(left, Const) and isinstance(right, Const):
            return STATIC
        name = type(operator).__name__.replace("Assign", "")
        return self.compute(_OPERATOR_NAMES.get(name, name.lower()), (left, right), node)

    def _ev_unary(self, node: cst.UnaryOperation, scope: Any) -> Any:
        operand = self.ev(node.expression, scope)
        if isinstance(node.operator, cst.Not):
            return UNKNOWN
        number = isinstance(operand, Const) and type(operand.value) in (int, float)
        if number:
            if isinstance(node.operator, cst.Minus):
                return Const(-operand.value)
            if isinstance(node.operator, cst.Plus):
                return operand
        name = _OPERATOR_NAMES.get(type(node.operator).__name__, type(node.operator).__name__.lower())
        return self.compute(name, (operand,), node, f"operator.{name}")

    def _ev_comparison(self, node: cst.Comparison, scope: Any) -> Any:
        operands = [self.ev(node.left, scope)]
        for comparison in node.comparisons:
            if isinstance(comparison.operator, _PYTHON_COMPARISONS):
                return UNKNOWN
            operands.append(self.ev(comparison.comparator, scope))
        return self.compute("compare", tuple(operands), node)

    def _ev_if_exp(self, node: cst.IfExp, scope: Any) -> Any:
        test = self.ev(node.test, scope)
        decided = truth(test)
        if decided is not None:
            return self.ev(node.body if decided else node.orelse, scope)
        body, orelse = self.ev(node.body, scope), self.ev(node.orelse, scope)
        if self.is_flag(node.test, test, scope) and not conditional(body) and not conditional(orelse):
            return join_branches(body, orelse, node.test)
        return join(body, orelse)

    def _ev_lambda(self, node: cst.Lambda, scope: Any) -> Any:
        return Function(node, scope)

    def _ev_named_expr(self, node: cst.NamedExpr, scope: Any) -> Any:
        value = self.ev(node.value, scope)
        if isinstance(scope, Frame) and isinstance(node.target, cst.Name):
            scope.env[node.target.value] = value
        return value

    def _ev_comprehension(self, node: Any, scope: Any) -> Any:
        names_here: set = set()
        clause = node.for_in
        while clause is not None:
            names_here.update(target_names(clause.target))
            clause = clause.inner_for_in
        return iteration.comprehension(self, node, scope, Frame(frozenset(names_here), scope))

    def _ev_boolean(self, node: cst.BooleanOperation, scope: Any) -> Any:
        self.ev(node.left, scope)
        self.ev(node.right, scope)
        return UNKNOWN

    def compute(self, op: str, operands: tuple, node: Any, kind: str = "compute") -> Any:
        """An operation whose single array result is computed from its operands' data.

        ``kind`` names the operation for :data:`names.MAYBE_IDENTITY`; those that may be
        skipped by JAX are recorded as ``maybe_identity`` rather than ``compute``, slices
        (``kind="slice"``, ``"strided slice"``) as ``slice``. A computation on a host value is
        recorded for OFL1201; one JAX >= 0.7.1 refuses for its operands' memory spaces, for
        OFL1215. In eager code JAX compiles each operation alone (:mod:`.eager`).
        """
        if self.in_eager_code:
            return self.eager_compute(op, operands, node, kind)
        if kind == "maybe_identity" or kind in names.MAYBE_IDENTITY:
            category = "maybe_identity"
        else:
            category = "slice" if kind in ("slice", "strided slice") else "compute"
        host = None
        unknown = explicit = False
        for operand in operands:
            for leaf in leaves(operand):
                if isinstance(leaf, HostArray):
                    if host is None:
                        host = leaf
                    elif (host.origin.kind, host.origin.memory_kind) != (leaf.origin.kind, leaf.origin.memory_kind):
                        return UNKNOWN
                    explicit = explicit or "explicit_device" in leaf.steps
                elif isinstance(leaf, DeviceArray):
                    explicit = explicit or leaf.explicit
                elif not isinstance(leaf, (Const, Ref, ShardingSpec, DeviceRef)):
                    unknown = True
        if host is not None:
            if self.refused(op, host, operands):
                self.refusals.append((host.origin, op, node))
                return UNKNOWN
            if category == "compute" and not explicit and not self._host_compute_depth and op not in _MEMORY_OPS:
                self.record_host_compute(host, op, node)
            result = host.after(category, op, node)
            if explicit:
                result = replace(result, steps=result.steps | {"explicit_device"})
            return result if result.single else replace(result, single=True)
        if unknown or self._host_compute_depth:
            return UNKNOWN
        return DeviceArray(True, explicit) if explicit else DEVICE_LEAF

    def record_host_compute(self, host: HostArray, op: str, node: Any) -> None:
        """A computation XLA runs on the host CPU over a host value (OFL1201)."""
        if len(self.host_computations) < _MAX_HOST_COMPUTATIONS:
            self.host_computations.append((host.origin, op, node))

    # ------------------------------------------------------------------ calls
    def _ev_call(self, node: cst.Call, scope: Any) -> Any:
        func = node.func
        receiver = None
        if isinstance(func, cst.Attribute):
            receiver = self.ev(func.value, scope)
            if isinstance(receiver, Ref):
                callee = Ref(f"{receiver.qualname}.{func.attr.value}")
            elif isinstance(receiver, ProjectModule):
                callee = self.module_attribute(receiver, func.attr.value)
            elif isinstance(receiver, Instance):
                field = receiver.get(func.attr.value)
                callee = self.instance_member(receiver, func.attr.value, node) if field is None else field
            else:
                callee = None
        else:
            callee = self.ev(func, scope)
        arguments = self._arguments(node, scope)
        if arguments is None:
            result = UNKNOWN
        elif callee is None:  # only a method call (``func`` an attribute) leaves the callee to its receiver
            method = cast(cst.Attribute, func)
            result = self._method(receiver, method.attr.value, *arguments, node, method.value, scope)
        else:
            result = self.apply(callee, *arguments, node, scope)
        if isinstance(scope, Frame) and _may_mutate(callee):
            for arg in node.args:
                if isinstance(arg.value, cst.Name):
                    value = scope.env.get(arg.value.value)
                    if isinstance(value, Mapping) or (isinstance(value, Seq) and value.is_list):
                        self.forget_aliases(value, scope)
            self.forget_changed_instances(callee, node, scope)
        return result

    def _arguments(self, node: cst.Call, scope: Any) -> tuple[list, dict] | None:
        args: list = []
        kwargs: dict = {}
        for arg in node.args:
            value = self.ev(arg.value, scope)
            if arg.star == "*":
                if not isinstance(value, Seq):
                    return None
                args.extend(value.items)
            elif arg.star == "**":
                if not isinstance(value, Mapping) or not all(isinstance(k, str) for k, _ in value.items):
                    return None
                kwargs.update(value.items)
            elif arg.keyword is not None:
                kwargs[arg.keyword.value] = value
            else:
                args.append(value)
        return args, kwargs

    def apply(self, callee: Any, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        if isinstance(callee, Ref):
            return jax_api.call(self, callee.qualname, args, kwargs, node, scope)
        if isinstance(callee, Function):
            return self.inline(callee, args, kwargs, node)
        if isinstance(callee, Bound):
            merged = dict(callee.kwargs)
            merged.update(kwargs)
            return self.apply(callee.fn, [*callee.args, *args], merged, node, scope)
        if isinstance(callee, Jitted):
            if self.in_eager_code:
                return self.eager_jit_call(callee, args, kwargs, node, scope)
            return jax_api.nested_jit(self, callee, args, kwargs, node, scope)
        if isinstance(callee, JitFactory):
            options = callee.options.merged(jax_api.with_unpacked(jax_api.keywords(node, scope), kwargs, node))
            return Jitted(args[0], options) if args else JitFactory(options)
        if isinstance(callee, Transform):
            return jax_api.transformed(self, callee, args, kwargs, node, scope)
        if isinstance(callee, Differentiated):
            return jax_api.differentiated(self, callee, args, kwargs, node, scope)
        if isinstance(callee, DataclassType):
            return self.construct(callee, args, kwargs, node)
        if isinstance(callee, Instance):
            call = self.instance_member(callee, "__call__", node)
            return UNKNOWN if call is UNKNOWN else self.apply(call, args, kwargs, node, scope)
        if isinstance(callee, ReplaceMethod):
            return jax_api.instantiate(callee.instance.fields, args, kwargs, callee.instance.cls)
        if isinstance(callee, TransformFactory) and args:
            return jax_api.transform_of(callee.kind, args[0], callee.out_memory)
        return UNKNOWN

    def _method(
        self, receiver: Any, name: str, args: list, kwargs: dict, node: Any, receiver_node: Any, scope: Any
    ) -> Any:
        if isinstance(receiver, Optimizer):
            return jax_api.optimizer_method(self, receiver, name, args, kwargs, node)
        if name == "with_memory_kind":
            sharding = jax_api.sharding_of_kind(args[0] if args else kwargs.get("kind"))
            if isinstance(receiver, ShardingSpec) and isinstance(sharding, ShardingSpec):
                return replace(sharding, placement=receiver.placement, mesh_axes=receiver.mesh_axes)
            return sharding
        if isinstance(receiver, (HostArray, DeviceArray)):
            if name == "addressable_data" and isinstance(receiver, HostArray):
                return shard_data(receiver)
            if name == "block_until_ready" and not args and not kwargs:
                return receiver
            if name in names.ARRAY_METHODS:
                return self.compute(name, (receiver, *args, *kwargs.values()), node, f"method.{name}")
            if name == "copy" and not args:
                return receiver.after("copy", "copy", node) if isinstance(receiver, HostArray) else receiver
            return UNKNOWN
        if isinstance(receiver, AtIndexed) and name in names.AT_METHODS:
            return self.compute(
                _at_op(name, receiver), (receiver.base, *receiver.operands, *args, *kwargs.values()), node
            )
        items = iteration.mapping_method(receiver, name, args)
        if items is not None:
            return items
        if isinstance(receiver, Mapping) and name == "get" and args and isinstance(args[0], Const):
            item = receiver.get(args[0].value)
            return item if item is not None else (args[1] if len(args) > 1 else NONE)
        if isinstance(receiver, (Mapping, Seq)) and name in names.MUTATING_METHODS and isinstance(scope, Frame):
            self.forget_base(receiver_node, scope)
        return UNKNOWN


def _at_op(method: str, indexed: AtIndexed) -> str:
    """``x.at[i].set(v)`` at constant indices is a dynamic-update-slice to XLA (its simplifier
    rewrites a one-update scatter at constant indices); at an index that is an array, a scatter.
    An index the check cannot evaluate (a Python loop's counter) is taken as constant."""
    traced = any(isinstance(leaf, (HostArray, DeviceArray)) for operand in indexed.operands for leaf in leaves(operand))
    return "scatter" if method == "set" and traced else f"at[].{method}"


def _may_mutate(callee: Any) -> bool:
    """Calls that might change a dict or list passed to them (anything but modelled JAX APIs;
    a transformed function receives a pytree rebuilt from tracers, never the caller's)."""
    if isinstance(callee, (Differentiated, Jitted, Transform)):
        return False
    if isinstance(callee, Ref):
        qualname = callee.qualname
        return not (qualname.startswith("jax.") or qualname in names.PARTIAL or qualname.startswith("builtins."))
    return True


_DISPATCH: dict[type, Callable[[Any, Any, Any], Any]] = {
    cst.Name: ExpressionEvaluator._ev_name,
    cst.Integer: ExpressionEvaluator._ev_literal,
    cst.Float: ExpressionEvaluator._ev_literal,
    cst.Imaginary: ExpressionEvaluator._ev_literal,
    cst.SimpleString: ExpressionEvaluator._ev_literal,
    cst.Attribute: ExpressionEvaluator._ev_attribute,
    cst.Subscript: ExpressionEvaluator._ev_subscript,
    cst.Call: ExpressionEvaluator._ev_call,
    cst.Tuple: ExpressionEvaluator._ev_tuple,
    cst.List: ExpressionEvaluator._ev_tuple,
    cst.Dict: ExpressionEvaluator._ev_dict,
    cst.BinaryOperation: ExpressionEvaluator._ev_binary,
    cst.UnaryOperation: ExpressionEvaluator._ev_unary,
    cst.Comparison: ExpressionEvaluator._ev_comparison,
    cst.BooleanOperation: ExpressionEvaluator._ev_boolean,
    cst.IfExp: ExpressionEvaluator._ev_if_exp,
    cst.Lambda: ExpressionEvaluator._ev_lambda,
    cst.NamedExpr: ExpressionEvaluator._ev_named_expr,
    cst.Ellipsis: lambda self, node, scope: STATIC,
    cst.ListComp: ExpressionEvaluator._ev_comprehension,
    cst.GeneratorExp: ExpressionEvaluator._ev_comprehension,
    cst.SetComp: ExpressionEvaluator._ev_comprehension,
    cst.DictComp: ExpressionEvaluator._ev_comprehension,
}
