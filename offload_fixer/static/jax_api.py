"""What each modelled JAX (and optax, flax, dataclasses) callable does to memory kinds.

:data:`APIS` maps a canonical qualified name (:mod:`.names`) to an :class:`Api`: what a call
returns, what the callable makes of a function it decorates, and what ``functools.partial``
of it makes (a decorator factory). A name missing from the table is unknown to the check,
whose values then stay ``UNKNOWN``. To model another API, add its name to :mod:`.names` and
its entry to :func:`_table`; the loops and branches of ``lax`` are in :mod:`.control_flow`.

The other functions here are what JAX does to values that are not named calls: a jitted,
transformed or differentiated function of the program being called, an optax optimizer's
methods, and the memory a ``device_put`` target or an ``in_shardings`` leaf names.

Over 500 lines on purpose: a table, one entry per JAX API the check models, and the few
functions its entries share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from offload_fixer.model import DEVICE, PINNED_HOST, format_output_path

from . import control_flow, iteration, names
from .evaluator import ABSENT, Evaluator, call_argument
from .values import (
    DEVICE_TREE,
    NONE,
    STATIC,
    UNKNOWN,
    Bound,
    Const,
    DeviceArray,
    DeviceList,
    DeviceRef,
    Differentiated,
    Function,
    HostArray,
    HostOrigin,
    Instance,
    JitFactory,
    JitOptions,
    Jitted,
    Mapping,
    MeshAxes,
    Optimizer,
    Ref,
    Seq,
    ShardingSpec,
    Transform,
    TransformFactory,
    Unpacked,
    after_each,
    is_single_array,
    leaves,
    map_leaves,
)

Handler = Callable[[Evaluator, list, dict, Any, Any], Any]
"""``(interpreter, positional values, keyword values, call node, scope) -> result``."""

HOST_COMPUTE_CONTEXT = Const("compute_on")
"""What ``compute_on("device_host")`` returns: a ``with`` over it computes on the host."""
HOST_COMPUTE = "host_compute"
"""The transform of ``compute_on``'s function form (:func:`host_computed`)."""


@dataclass(frozen=True)
class Api:
    """What one callable does: called, used as a decorator, given to ``functools.partial``."""

    call: Handler
    decorate: Callable[[Any], Any] | None = None
    """What ``@api`` makes of the decorated function's value; None: not modelled as one."""
    partial: Handler | None = None
    """What ``functools.partial(api, ...)`` makes, from the arguments bound after ``api``
    (and the call node and its scope)."""


def call(interp: Evaluator, qualname: str, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    """The result of calling the callable named ``qualname``."""
    api = APIS.get(qualname)
    if api is not None:
        return api.call(interp, args, kwargs, node, scope)
    if names.is_transfer_to_memory_kind(qualname):
        return sharding_of_kind(args[0] if args else kwargs.get("memory_kind"))
    return UNKNOWN


def decorated(qualname: str, value: Any) -> Any:
    """What ``@qualname`` makes of a function's value."""
    api = APIS.get(qualname)
    return UNKNOWN if api is None or api.decorate is None else api.decorate(value)


def transform_of(kind: str, fn: Any, out_memory: Any = None) -> Any:
    """``fn`` under the transform ``kind`` (:data:`names.VMAP`, ... or ``custom_jvp``);
    ``out_memory``: a host computation's ``out_memory_spaces``."""
    if kind == "wraps":
        return fn  # ``functools.wraps(f)`` copies names onto ``fn``, nothing JAX sees
    if kind in ("custom_jvp", "custom_vjp"):
        return Function(fn.node, fn.scope, kind) if isinstance(fn, Function) else UNKNOWN
    return Transform(kind, fn, out_memory)


def keywords(node: Any, scope: Any, positional: tuple = ()) -> JitOptions:
    """Options of a call, by keyword, and by position for the names in ``positional``."""
    options = []
    for index, arg in enumerate(node.args):
        if arg.keyword is not None:
            options.append((arg.keyword.value, arg.value, scope, arg))
        elif not arg.star and 0 < index < len(positional):
            options.append((positional[index], arg.value, scope, arg))
    return JitOptions(tuple(options))


def sharding_of_kind(kind: Any) -> Any:
    """A sharding whose memory kind is the string ``kind``; unknown for anything else."""
    return ShardingSpec(kind.value) if isinstance(kind, Const) and isinstance(kind.value, str) else UNKNOWN


def instantiate(fields: tuple, args: list, kwargs: dict, cls: Any = None) -> Any:
    """A dataclass instance: positional arguments in field order, then keywords, then defaults."""
    if len(args) > len(fields) or set(kwargs) - {name for name, _ in fields}:
        return UNKNOWN
    values = dict(fields)
    for (name, _), value in zip(fields, args):
        values[name] = value
    values.update(kwargs)
    return Instance(tuple((name, values[name]) for name, _ in fields), cls)


# ------------------------------------------------------------------ named calls
_JIT_POSITIONAL = ("fun", "in_shardings", "out_shardings")


def _jit(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if args:
        return Jitted(args[0], with_unpacked(keywords(node, scope, _JIT_POSITIONAL), kwargs, node))
    return JitFactory(with_unpacked(keywords(node, scope), kwargs, node))


def with_unpacked(options: JitOptions, kwargs: dict, node: Any) -> JitOptions:
    """``options`` and the keywords a ``**options`` argument of the call ``node`` passes
    (``jax.jit(fn, **options)`` in a decorator factory, ``functools.partial(jax.jit, **opts)``),
    from their evaluated values in ``kwargs``; those that cannot be read stay unknown."""
    star = next((arg for arg in reversed(node.args) if arg.star == "**"), None)
    if star is None:
        return options
    written = {entry[0] for entry in options.keywords}
    unpacked = tuple((name, Unpacked(value), None, star) for name, value in kwargs.items() if name not in written)
    return JitOptions(options.keywords + unpacked) if unpacked else options


def option_value(interp: Evaluator, found: tuple) -> Any:
    """The value of one option (:meth:`JitOptions.get`)."""
    return found[0].value if isinstance(found[0], Unpacked) else interp.ev(found[0], found[1])


def _partial(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    """``functools.partial(head, *rest, **kwargs)``: a decorator factory for a modelled API,
    a bound function for one of the program's."""
    if not args:
        return UNKNOWN
    head = args[0]
    if isinstance(head, Ref):
        api = APIS.get(head.qualname)
        made = UNKNOWN if api is None or api.partial is None else api.partial(interp, args[1:], kwargs, node, scope)
        return JitFactory(with_unpacked(made.options, kwargs, node)) if isinstance(made, JitFactory) else made
    if isinstance(head, (Function, Bound)):
        return Bound(head, tuple(args[1:]), tuple(kwargs.items()))
    return UNKNOWN


def _device_put(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    x = call_argument(args, kwargs, 0, "x")
    return UNKNOWN if x is ABSENT else put(x, call_argument(args, kwargs, 1, "device"), node)


def put(x: Any, target: Any, node: Any, mover: str = "jax.device_put") -> Any:
    """``jax.device_put(x, target)``: each leaf moved to the memory its target names (or put
    there by ``mover``)."""
    if target is ABSENT or target is NONE:
        return after_each(x, "noop_put", "device_put", node)
    if isinstance(target, (Seq, Mapping)):
        if isinstance(x, Seq) and isinstance(target, Seq) and len(x.items) == len(target.items):
            return Seq(tuple(put(a, t, node, mover) for a, t in zip(x.items, target.items)), x.is_list)
        if (
            isinstance(x, Mapping)
            and isinstance(target, Mapping)
            and sorted(map(repr, (k for k, _ in x.items))) == sorted(map(repr, (k for k, _ in target.items)))
        ):
            return Mapping(tuple((k, put(v, target.get(k), node, mover)) for k, v in x.items))
        return UNKNOWN
    kind = memory_kind_of(target)
    placement = target.placement if isinstance(target, ShardingSpec) else None
    if kind in names.HOST_KINDS:
        origin = HostOrigin(
            "move_to_host",
            kind,
            node,
            f"{mover} to {kind} memory",
            condition=condition_of(target),
            mesh_axes=target.mesh_axes if isinstance(target, ShardingSpec) else None,
        )
        return map_leaves(
            x,
            lambda leaf: HostArray(origin, single=is_single_array(leaf), placement=placement, shaped=_shaped(leaf)),
        )
    if kind in names.DEVICE_KINDS:
        return map_leaves(
            x, lambda leaf: DeviceArray(single=is_single_array(leaf), explicit=True, shaped=_shaped(leaf))
        )
    if kind == "device_ref":
        return after_each(x, "noop_put", "device_put", node)
    if kind == "nokind":
        return map_leaves(x, lambda leaf: UNKNOWN if isinstance(leaf, HostArray) else leaf)
    return UNKNOWN


def _shaped(leaf: Any) -> bool:
    return isinstance(leaf, (HostArray, DeviceArray)) and leaf.shaped


def _sharding(placement: str | None) -> Handler:
    """A sharding class: ``memory_kind=`` names its memory; ``placement`` is how it places an
    array (``single``: one device, ``mesh``: a named sharding over a mesh)."""

    def sharding(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        kind = kwargs.get("memory_kind", NONE)
        found = ShardingSpec(None) if kind is NONE else sharding_of_kind(kind)
        if not isinstance(found, ShardingSpec):
            return found
        mesh = call_argument(args, kwargs, 0, "mesh") if placement == "mesh" else None
        axes = mesh.axis_type if isinstance(mesh, MeshAxes) else None
        return replace(found, placement=placement, mesh_axes=axes)

    return sharding


def _mesh(default: str) -> Handler:
    """A mesh constructor: the type of the axes its ``axis_types`` names, or ``default``."""

    def mesh(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        types = call_argument(args, kwargs, 2, "axis_types")
        if types is ABSENT or types is NONE:
            return MeshAxes(default)
        items = types.items if isinstance(types, Seq) else (UNKNOWN,)
        named = {names.AXIS_TYPES.get(t.qualname) if isinstance(t, Ref) else None for t in items}
        return MeshAxes(named.pop() if len(named) == 1 else None)

    return mesh


def _block_until_ready(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    return args[0] if len(args) == 1 and not kwargs else UNKNOWN


def _getattr(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    """``getattr(x, "name")`` with a constant name: ``x.name``; with a default, either."""
    if not 2 <= len(args) <= 3 or kwargs or not isinstance(args[1], Const) or not isinstance(args[1].value, str):
        return UNKNOWN
    found = interp.attribute_of(args[0], args[1].value, node)
    if len(args) == 3 and found is UNKNOWN:
        return UNKNOWN
    return found


def _created(qualname: str) -> Handler:
    """``jnp.ones(shape)``, ``jnp.arange(n)``...: a new array in device memory, with a dimension
    where its shape says so (JAX >= 0.7.1 compares the memory spaces of such operands)."""
    ranged = qualname.rsplit(".", 1)[1] in ("arange", "linspace", "eye", "identity")

    def created(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        if ranged:
            return DeviceArray(True, shaped=True)  # a range, a grid, a matrix: a dimension at least
        shape = args[0] if args else kwargs.get("shape", UNKNOWN)
        shaped = (isinstance(shape, Const) and type(shape.value) is int and shape.value > 0) or (
            isinstance(shape, Seq) and bool(shape.items)
        )
        return DeviceArray(True, shaped=shaped)

    return created


def _created_like(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    """``jnp.zeros_like(x)`` of a device array: another like it (of a host one, unknown)."""
    if not args or not isinstance(args[0], DeviceArray):
        return UNKNOWN
    return DeviceArray(True, shaped=args[0].shaped)


def _devices(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    return UNKNOWN if args or kwargs else DeviceList()


def _compute_on(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    """``compute_on("device_host")``: the context manager (JAX 0.4.29 - 0.11.0); called with
    ``compute_type=`` (and the outputs' memory spaces), the function form (``compute_on2``
    from 0.10.1, ``compute_on`` itself from 0.11.1): how it is called says which."""
    if "compute_type" in kwargs or "out_memory_spaces" in kwargs:
        return _host_compute_function(interp, args, kwargs, node, scope)
    device_host = args and isinstance(args[0], Const) and args[0].value == "device_host"
    return HOST_COMPUTE_CONTEXT if device_host else UNKNOWN


def _host_compute_function(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    """``compute_on(f, compute_type="device_host", out_memory_spaces=...)``: ``f`` run by the
    host CPU, its outputs put where ``out_memory_spaces`` says; without ``f``, a decorator."""
    compute_type = kwargs.get("compute_type", ABSENT)
    spaces = kwargs.get("out_memory_spaces", ABSENT)
    if not (isinstance(compute_type, Const) and compute_type.value == "device_host") or spaces is ABSENT:
        return UNKNOWN  # another compute type (device, a sparse core, a GPU stream) is not the host's
    fn = call_argument(args, kwargs, 0, "f", NONE)
    return TransformFactory(HOST_COMPUTE, spaces) if fn is NONE else transform_of(HOST_COMPUTE, fn, spaces)


def _transform(kind: str) -> Api:
    """``jax.vmap``/``shard_map``/``checkpoint``/``custom_jvp``: applied to a function, or
    called with options only (a decorator factory)."""

    def transform(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        return transform_of(kind, args[0]) if args else TransformFactory(kind)

    def custom_jvp(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        return transform_of(kind, args[0]) if args else UNKNOWN

    return Api(
        custom_jvp if kind in ("custom_jvp", "custom_vjp") else transform,
        lambda value: transform_of(kind, value),
        lambda interp, args, kwargs, node, scope: TransformFactory(kind),
    )


def _optax_with_state(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    return Optimizer(True)


def _optax_sgd(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    momentum = call_argument(args, kwargs, 1, "momentum", NONE)
    if momentum is NONE:
        return Optimizer(False)
    return Optimizer(True) if isinstance(momentum, Const) and momentum is not STATIC else Optimizer(None)


def _optax_chain(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    known = [a.stateful if isinstance(a, Optimizer) else None for a in args]
    return Optimizer(True if True in known else (None if None in known else False))


def _optax_apply_updates(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if len(args) != 2 or kwargs:
        return UNKNOWN
    return _leafwise_pair(interp, args[0], args[1], "apply_updates", node)


def _nnx_split(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if not args or not _uniform(args[0]):
        return UNKNOWN
    return Seq((UNKNOWN, *(args[0],) * max(len(args) - 1, 1)))


def _nnx_state(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if not args or not _uniform(args[0]):
        return UNKNOWN
    states = max(len(args) - 1, 1)
    return args[0] if states == 1 else Seq((args[0],) * states)


def _nnx_merge(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if len(args) < 2:
        return UNKNOWN
    states = args[1:]
    return states[0] if all(_uniform(s) and s == states[0] for s in states) else UNKNOWN


def _dataclass_replace(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if len(args) == 1 and isinstance(args[0], Instance):
        return instantiate(args[0].fields, [], kwargs, args[0].cls)
    return UNKNOWN


def _differentiation(with_value: bool) -> Handler:
    """``jax.grad``/``value_and_grad`` with the ``argnums`` and ``has_aux`` it can read."""

    def differentiate(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        if not args or len(args) > 1 or set(kwargs) - {"argnums", "has_aux"}:
            return UNKNOWN
        argnums = kwargs.get("argnums", Const(0))
        has_aux = kwargs.get("has_aux", Const(False))
        if not isinstance(has_aux, Const) or not isinstance(has_aux.value, bool):
            return UNKNOWN
        if isinstance(argnums, Seq) and all(isinstance(i, Const) and type(i.value) is int for i in argnums.items):
            positions: Any = tuple(i.value for i in argnums.items)
        elif isinstance(argnums, Const) and type(argnums.value) is int:
            positions = argnums.value
        else:
            return UNKNOWN
        return Differentiated(with_value, args[0], positions, has_aux.value)

    return differentiate


def _tree_map_call(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if len(args) < 2 or kwargs:
        return UNKNOWN
    return _tree_map(interp, args[0], args[1], args[2:], node, scope)


def _tree_map(interp: Evaluator, fn: Any, tree: Any, rest: list, node: Any, scope: Any) -> Any:
    """``jax.tree.map(fn, tree, *rest)`` over a pytree literal, leaf by leaf."""
    if isinstance(tree, Seq):
        if not all(isinstance(r, Seq) and len(r.items) == len(tree.items) for r in rest):
            return UNKNOWN
        return Seq(
            tuple(_tree_map(interp, fn, t, [r.items[i] for r in rest], node, scope) for i, t in enumerate(tree.items)),
            tree.is_list,
        )
    if isinstance(tree, Mapping):
        keys = [k for k, _ in tree.items]
        if not all(isinstance(r, Mapping) and [k for k, _ in r.items] == keys for r in rest):
            return UNKNOWN
        return Mapping(
            tuple(
                (k, _tree_map(interp, fn, t, [r.items[i][1] for r in rest], node, scope))
                for i, (k, t) in enumerate(tree.items)
            )
        )
    if tree is NONE:
        return NONE
    result = interp.apply(fn, [tree, *rest], {}, node, scope)
    if is_single_array(tree):
        return result
    if isinstance(result, ShardingSpec) and result.memory_kind is not None:
        # Every leaf of a sharding tree mapped to the same memory kind: one prefix leaf.
        return result
    # ``tree`` stands for a subtree of unknown structure: each of its leaves maps alike.
    if isinstance(result, HostArray):
        return replace(result, single=False)
    return DeviceArray(False, result.explicit) if isinstance(result, DeviceArray) else UNKNOWN


def _pytree_preserving(op: str) -> Handler:
    """``stop_gradient``, ``optimization_barrier``...: every leaf's data, the same structure."""

    def preserve(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        return after_each(args[0], "compute", op, node) if args else UNKNOWN

    return preserve


def _copy(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if (
        len(args) == 1
        and isinstance(args[0], Seq)
        and args[0].items
        and all(isinstance(i, Const) for i in args[0].items)
    ):
        return DeviceArray(True, shaped=True)  # ``jnp.array([0, 2])``: a new array of those numbers
    if len(args) == 1 and set(kwargs) <= {"copy"}:
        return after_each(args[0], "copy", "copy", node)
    return UNKNOWN


def _computation(qualname: str) -> Handler:
    """A function of :data:`names.COMPUTE_FUNCTIONS`: one array computed from its arguments."""
    op = qualname.rsplit(".", 1)[1]
    multi_result_keyword = names.MULTI_RESULT_WHEN.get(qualname)
    three_arguments_only = qualname in names.SINGLE_POSITIONAL_ONLY
    identity_alone = qualname in names.SINGLE_OPERAND_IDENTITY
    slice_kind = "slice" if qualname in names.SLICES else qualname

    def compute(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        if multi_result_keyword in kwargs:
            return UNKNOWN
        if three_arguments_only and len(args) != 3:
            return UNKNOWN
        kind = "maybe_identity" if identity_alone and _one_operand(args) else slice_kind
        return interp.compute(op, (*args, *kwargs.values()), node, kind)

    return compute


def _one_operand(args: list) -> bool:
    arrays = [a for a in args if not isinstance(a, Const)]
    return len(arrays) == 1 and (not isinstance(arrays[0], Seq) or len(arrays[0].items) == 1)


def _dict(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    return UNKNOWN if args else Mapping(tuple(kwargs.items()))


def _unknown(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    return UNKNOWN


def _table() -> dict[str, Api]:
    table: dict[str, Api] = {}

    def add(qualnames: Any, api: Api | Handler) -> None:
        for qualname in [qualnames] if isinstance(qualnames, str) else qualnames:
            if qualname in table:
                raise ValueError(f"{qualname} has two entries in the JAX-API table")
            table[qualname] = api if isinstance(api, Api) else Api(api)

    add(
        names.JIT,
        Api(
            _jit,
            lambda value: Jitted(value, JitOptions()),
            lambda interp, args, kwargs, node, scope: JitFactory(keywords(node, scope)),
        ),
    )
    add(names.PARTIAL, _partial)
    add(names.STATICMETHOD, Api(_unknown, lambda value: value))
    add(names.WRAPS, lambda interp, args, kwargs, node, scope: TransformFactory("wraps"))
    add(names.DEVICE_PUT, _device_put)
    for qualname in sorted(names.SHARDING_CLASSES):
        add(qualname, _sharding(names.SHARDING_PLACEMENTS.get(qualname)))
    for qualname, default in names.MESH_CONSTRUCTORS.items():
        add(qualname, _mesh(default))
    add(names.BLOCK_UNTIL_READY, _block_until_ready)
    add("builtins.getattr", _getattr)
    for qualname in sorted(names.ARRAY_CREATION):
        add(qualname, _created(qualname))
    add(names.ARRAY_CREATION_LIKE, _created_like)
    add(names.DEVICE_LISTS, _devices)
    add(names.COMPUTE_ON, Api(_compute_on, partial=_compute_on))
    add(names.COMPUTE_ON_FUNCTION, Api(_host_compute_function, partial=_host_compute_function))
    add(names.CUSTOM_JVP, _transform("custom_jvp"))
    add(names.CUSTOM_VJP, _transform("custom_vjp"))
    add(names.VMAP, _transform("vmap"))
    add(names.SHARD_MAP, _transform("shard_map"))
    add(names.CHECKPOINT, _transform("checkpoint"))
    add(names.OPTAX_WITH_STATE, _optax_with_state)
    add(names.OPTAX_SGD, _optax_sgd)
    add(names.OPTAX_CHAIN, _optax_chain)
    add(names.OPTAX_APPLY_UPDATES, _optax_apply_updates)
    add(names.NNX_SPLIT, _nnx_split)
    add(names.NNX_STATE, _nnx_state)
    add(names.NNX_MERGE, _nnx_merge)
    add(names.DATACLASS_REPLACE, _dataclass_replace)
    add(names.GRAD, _differentiation(False))
    add(names.VALUE_AND_GRAD, _differentiation(True))
    add(names.TREE_MAP, _tree_map_call)
    add(names.LAX_SCAN, control_flow.scan)
    add(names.LAX_MAP, control_flow.lax_map)
    add(names.LAX_WHILE, control_flow.while_loop)
    add(names.LAX_FORI, control_flow.fori_loop)
    add(names.LAX_COND, control_flow.cond)
    add(names.LAX_SWITCH, control_flow.switch)
    for qualname, op in names.PYTREE_PRESERVING.items():
        add(qualname, _pytree_preserving(op))
    add(names.COPIES, _copy)
    for qualname in sorted(names.COMPUTE_FUNCTIONS):
        add(qualname, _computation(qualname))
    for qualname, handler in iteration.BUILTINS.items():
        add(qualname, handler)
    add(names.TREE_LEAVES, iteration.tree_leaves)
    add("builtins.dict", _dict)
    return table


APIS: dict[str, Api] = _table()


# ------------------------------------------------------------------ calls of other values
def nested_jit(interp: Evaluator, jitted: Jitted, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    """A jitted helper called inside a jitted function: its outputs pass through a call."""
    for keyword in ("in_shardings", "out_shardings", "in_axis_resources", "out_axis_resources"):
        found = jitted.options.get(keyword)
        if found is not None and option_value(interp, found) is not NONE:
            return UNKNOWN
    return after_each(interp.apply(jitted.target, args, kwargs, node, scope), "compute", "nested jit", node)


def transformed(interp: Evaluator, transform: Transform, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if transform.kind == HOST_COMPUTE:
        return host_computed(interp, transform, args, kwargs, node, scope)
    result = interp.apply(transform.fn, args, kwargs, node, scope)
    if transform.kind == "shard_map":
        return after_each(result, "compute", "shard_map", node)
    if transform.kind == "checkpoint":
        # A host value passed in is computed on in the body like anywhere else; a move to host
        # inside a rematerialised body is the offload machinery's, which the check leaves to ``run``.
        entering = {leaf.origin for a in (*args, *kwargs.values()) for leaf in leaves(a) if isinstance(leaf, HostArray)}
        return map_leaves(
            result,
            lambda leaf: (
                (leaf.after("compute", "checkpoint", node) if leaf.origin in entering else UNKNOWN)
                if isinstance(leaf, HostArray)
                else leaf
            ),
        )
    return result


def host_computed(interp: Evaluator, transform: Transform, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    """A call of a function under ``compute_on``'s function form: its body is host compute the
    program asks for (as under the context form: no OFL1201 inside), and each output is a new
    value in the memory its ``out_memory_spaces`` names (JAX moves it there at the call), the
    structure and leaves of the body's result kept, whatever the check knows of them."""
    with interp.computing_on_host():
        result = interp.apply(transform.fn, args, kwargs, node, scope)
    return put(result, transform.out_memory, node, "compute_on")


def differentiated(interp: Evaluator, grad: Differentiated, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    """The value is ``f`` traced on the arguments; a gradient is device memory when every
    input is (the cotangent of a move to host is a move back), else unknown."""
    value = interp.apply(grad.fn, args, kwargs, node, scope)
    aux = UNKNOWN
    if grad.has_aux:
        if isinstance(value, Seq) and len(value.items) == 2:
            value, aux = value.items
        else:
            value = UNKNOWN
    positions = grad.argnums if isinstance(grad.argnums, tuple) else (grad.argnums,)
    if not all(-len(args) <= i < len(args) for i in positions):
        return UNKNOWN
    inputs = [leaf for a in (*args, *kwargs.values()) for leaf in leaves(a)]
    on_device = all(isinstance(leaf, (DeviceArray, Const)) for leaf in inputs)
    # A value computed on host (a host input used before any move to device): the backward
    # pass reads those residuals, so every gradient is computed on host too. A host input
    # moved to device first gets its gradient through the move's transpose: left unknown.
    primal = next((leaf for leaf in leaves(value) if isinstance(leaf, HostArray)), None)
    host = None if primal is None else primal.after("compute", "grad", node)

    def gradient_leaf(leaf: Any) -> Any:
        if on_device:
            return DeviceArray(is_single_array(leaf))
        if host is not None and isinstance(leaf, (HostArray, DeviceArray, Const)):
            return HostArray(host.origin, host.steps, host.trace, is_single_array(leaf))
        return UNKNOWN

    grads = [map_leaves(args[i], gradient_leaf) for i in positions]
    gradient = grads[0] if not isinstance(grad.argnums, tuple) else Seq(tuple(grads))
    if grad.has_aux:
        return Seq((Seq((value, aux)), gradient)) if grad.with_value else Seq((gradient, aux))
    return Seq((value, gradient)) if grad.with_value else gradient


def optimizer_method(interp: Evaluator, optimizer: Optimizer, name: str, args: list, kwargs: dict, node: Any) -> Any:
    """``tx.update(grads, state, params)`` -> ``(updates, new_state)``: updates computed
    from the gradients and, for an optimizer with moments, from its state; ``tx.init``."""
    if name == "init" and len(args) == 1:
        return map_leaves(
            args[0], lambda leaf: DeviceArray(is_single_array(leaf)) if isinstance(leaf, DeviceArray) else UNKNOWN
        )
    if name != "update" or not 2 <= len(args) <= 3 or kwargs:
        return UNKNOWN
    grads, state = args[0], args[1]
    reads_state = optimizer.stateful
    if reads_state is None:
        if any(isinstance(leaf, HostArray) for leaf in leaves(state)):
            return UNKNOWN
        reads_state = True
    operands = (state,) if reads_state else ()
    updates = _map_keeping_structure(grads, lambda g: interp.compute("optax update", (g, *operands), node))
    new_state = (
        _map_keeping_structure(state, lambda s: interp.compute("optax update", (s, grads), node))
        if reads_state
        else state
    )
    return Seq((updates, new_state))


def _leafwise_pair(interp: Evaluator, tree: Any, other: Any, op: str, node: Any) -> Any:
    """An elementwise function of two pytrees of the same structure (``apply_updates``)."""
    if isinstance(tree, Seq) and isinstance(other, Seq) and len(tree.items) == len(other.items):
        return Seq(tuple(_leafwise_pair(interp, a, b, op, node) for a, b in zip(tree.items, other.items)), tree.is_list)
    if (
        isinstance(tree, Mapping)
        and isinstance(other, Mapping)
        and [k for k, _ in tree.items] == [k for k, _ in other.items]
    ):
        return Mapping(
            tuple((k, _leafwise_pair(interp, a, b, op, node)) for (k, a), (_, b) in zip(tree.items, other.items))
        )
    return _map_keeping_structure(tree, lambda leaf: interp.compute(op, (leaf, other), node))


def _uniform(value: Any) -> bool:
    """A pytree of unknown structure whose leaves are all in one memory."""
    return isinstance(value, (HostArray, DeviceArray)) and not value.single


def _map_keeping_structure(tree: Any, fn: Any) -> Any:
    """``fn`` on each leaf; a leaf standing for a subtree of unknown structure stays one."""

    def leaf(value: Any) -> Any:
        result = fn(value)
        if is_single_array(value) or not isinstance(result, (HostArray, DeviceArray)):
            return result
        return replace(result, single=False)

    return map_leaves(tree, leaf)


# ------------------------------------------------------------------ memory kinds of shardings
@dataclass(frozen=True)
class ShardingLeaf:
    """A leaf of ``in_shardings`` with the expression that spells it (for the origin span)."""

    value: Any
    node: Any


def memory_kind_of(value: Any) -> str | None:
    """The memory a ``device_put`` target or sharding names: a kind, ``nokind``, ``device_ref``."""
    if isinstance(value, ShardingLeaf):
        value = value.value
    if isinstance(value, ShardingSpec):
        if value.memory_kind is None:
            return "nokind"
        if value.memory_kind in names.HOST_KINDS or value.memory_kind in names.DEVICE_KINDS:
            return value.memory_kind
        return None
    if isinstance(value, Ref):
        if value.qualname in names.SPACE_HOST:
            return PINNED_HOST
        if value.qualname in names.SPACE_DEVICE:
            return DEVICE
        return None
    if isinstance(value, DeviceRef):
        return "device_ref"
    return None


def condition_of(target: Any) -> Any:
    return target.condition if isinstance(target, ShardingSpec) else None


def with_spelling(value: Any, node: Any) -> Any:
    """Each leaf of an evaluated ``in_shardings`` (sub)tree, with the expression that spells it."""
    if isinstance(value, Instance):
        return replace(value, fields=tuple((k, with_spelling(v, node)) for k, v in value.fields))
    if isinstance(value, Seq):
        return Seq(tuple(with_spelling(v, node) for v in value.items), value.is_list)
    if isinstance(value, Mapping):
        return Mapping(tuple((k, with_spelling(v, node)) for k, v in value.items))
    if value is NONE or value is UNKNOWN:
        return value
    return ShardingLeaf(value, node)


def argument_from_shardings(tree: Any, name: str, keys: tuple, written: Any) -> Any:
    """A traced argument's abstract value, following its ``in_shardings`` prefix tree (a
    dataclass or NamedTuple of shardings gives its fields, labelled ``state.moment``)."""
    if isinstance(tree, Instance):
        return Instance(
            tuple((k, argument_from_shardings(t, name, keys + (("attr", k),), written)) for k, t in tree.fields),
            tree.cls,
        )
    if isinstance(tree, Seq):
        return Seq(
            tuple(argument_from_shardings(t, name, keys + (("index", i),), written) for i, t in enumerate(tree.items)),
            tree.is_list,
        )
    if isinstance(tree, Mapping):
        return Mapping(
            tuple((k, argument_from_shardings(t, name, keys + (("key", k),), written)) for k, t in tree.items)
        )
    if tree is NONE:
        return DEVICE_TREE
    if isinstance(tree, ShardingLeaf):
        kind = memory_kind_of(tree.value)
        if kind in names.HOST_KINDS and kind not in names.HOST_MEMORY_SPACE_KINDS:
            return UNKNOWN  # unpinned_host arguments are not host memory to XLA (S(6) on TPU)
        if kind in names.HOST_KINDS:
            label = name + format_output_path(keys)
            origin = HostOrigin(
                "host_argument",
                kind,
                written,
                f"argument {label} declared {kind} (in_shardings)",
                argument=label,
                declared_at=tree.node,
                condition=condition_of(tree.value),
            )
            return HostArray(origin, single=False)
        if kind in names.DEVICE_KINDS or kind == "nokind":
            return DEVICE_TREE
    return UNKNOWN
