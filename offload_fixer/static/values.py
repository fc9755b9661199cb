"""Abstract values the static interpreter computes for Python expressions in jitted code.

The lattice is deliberately small: a value is either known (an array on device, an array on
host with the story of how it got there, a pytree literal, a sharding, a function) or
``UNKNOWN``. Only host arrays produce diagnostics, and any operation the check does not model
turns its result into ``UNKNOWN``, which keeps the check silent instead of guessing.

Over 500 lines on purpose: the lattice's values, one small dataclass each, which every part
of the interpreter reads together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .names import HOST_KINDS


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()


@dataclass(frozen=True)
class NoneValue:
    """Python ``None``: an empty pytree, no output."""


NONE = NoneValue()


@dataclass(frozen=True)
class Const:
    """A Python literal. Numbers and booleans become device constants when traced."""

    value: Any


STATIC = Const(None)
"""A Python value computed at trace time (a shape, a product of constants): never an array."""


@dataclass(frozen=True)
class DeviceArray:
    """Data in device memory. ``single`` is False when the structure is unknown (a pytree argument)."""

    single: bool
    explicit: bool = False
    """Computed from a ``device_put`` to device memory: JAX >= 0.7.1 types it with an explicit
    memory space, and a result mixing it with host data is returned through a move to device."""
    shaped: bool = False
    """Known to have a dimension (``jnp.ones(8)``, an elementwise result of one): JAX >= 0.7.1
    compares the memory spaces of such operands only (:mod:`.eager`)."""


DEVICE_LEAF = DeviceArray(single=True)
DEVICE_TREE = DeviceArray(single=False)


@dataclass(frozen=True)
class Condition:
    """The branch of a Python ``if`` (or conditional expression) a value depends on: the test
    expression, and whether the value comes from the branch taken when it is true."""

    test: Any
    holds: bool


@dataclass(frozen=True)
class HostOrigin:
    """Where a value became host memory: a ``device_put`` to host or a host ``in_shardings`` leaf."""

    kind: Literal["move_to_host", "host_argument"]
    """As in :class:`offload_fixer.model.Origin`."""
    memory_kind: str
    node: Any
    """The libcst node to underline: the ``device_put`` call, or the ``in_shardings=`` argument
    of the jit site (where the dynamic analysis points a host argument too)."""
    detail: str
    argument: str | None = None
    """For ``host_argument``: the label JAX gives the argument leaf (``params['w']``)."""
    declared_at: Any = None
    """For ``host_argument``: the ``in_shardings`` element that puts it on host."""
    condition: Condition | None = None
    """Set when the value is host only on one branch of an ``if`` whose test the check
    cannot decide (a configuration flag): the finding holds when that branch runs."""
    assumed: bool = False
    """Known to be in host memory from a test of its memory kind (``if x.sharding.memory_kind
    == "pinned_host":``), not from a move the check saw: a move seen elsewhere names it better."""
    mesh_axes: str | None = None
    """For ``move_to_host``: the axis types of the target sharding's mesh (:class:`MeshAxes`)."""


@dataclass(frozen=True)
class TraceStep:
    op: str
    role: str
    node: Any


@dataclass(frozen=True)
class HostArray:
    """Data in host memory, with the categories of operations applied since it got there.

    Categories (what matters to the regime rules): ``compute`` (elementwise, index, nested
    jit, cond, ...), ``maybe_identity`` (reshape, astype, ``.T``: skipped by JAX when they
    change nothing), ``carry`` (passed unchanged through a loop carry), ``copy``,
    ``noop_put`` (``device_put`` that does not move it), ``cond_mixed`` (a cond whose other
    branch is device).
    """

    origin: HostOrigin
    steps: frozenset = frozenset()
    trace: tuple = ()
    single: bool = True
    placement: str | None = None
    """How the sharding it was moved with places it: ``single`` (one device), ``mesh`` (a
    named sharding over a mesh), None (unknown). Eager indexing depends on it (:mod:`.eager`)."""
    shard: bool = False
    """The data of one addressable shard (``x.addressable_shards[i].data``): JAX >= 0.7.1
    types it device memory though it is in host memory."""
    shaped: bool = False
    """Known to have a dimension, as :attr:`DeviceArray.shaped`."""
    scalar: bool = False
    """Known to have none: a full reduction's result (``jnp.sum(x)``). JAX >= 0.7.1 gives an
    operation on scalars alone a result in device memory, whatever memory they are in."""

    def after(self, category: str, op: str, node: Any) -> HostArray:
        trace = self.trace if len(self.trace) >= 16 else self.trace + (TraceStep(op, category, node),)
        return replace(self, steps=self.steps | {category}, trace=trace)


@dataclass(frozen=True)
class Seq:
    """A tuple or list literal: a pytree node with integer keys."""

    items: tuple
    is_list: bool = False


@dataclass(frozen=True)
class Mapping:
    """A dict literal with constant keys, in insertion order."""

    items: tuple  # ((key, value), ...)

    def get(self, key: Any) -> Any:
        for k, v in self.items:
            if k == key:
                return v
        return None


@dataclass(frozen=True)
class ShardingSpec:
    """A sharding or memory-space object; ``memory_kind`` None means none was declared."""

    memory_kind: str | None
    condition: Condition | None = None
    """Set when the kind is host only on one branch of an undecided ``if`` (see HostOrigin)."""
    placement: str | None = None
    """``single`` (``SingleDeviceSharding``), ``mesh`` (``NamedSharding``), None: unknown."""
    mesh_axes: str | None = None
    """The axis types of a ``NamedSharding``'s mesh, as :attr:`MeshAxes.axis_type` spells them."""


@dataclass(frozen=True)
class MeshAxes:
    """A mesh (``jax.make_mesh``, ``jax.sharding.Mesh``): its axes' type decides where JAX returns
    a value moved to ``unpinned_host`` over it (:func:`offload_fixer.static.rules.kept_on_device`)."""

    axis_type: str | None
    """``Explicit`` or ``Auto`` (every axis), ``make_mesh`` (the JAX version's default), None: unknown."""


@dataclass(frozen=True)
class NotArray:
    """A Python object known not to be an array (the branch where ``isinstance(x, jax.Array)``
    is false): it holds no memory, so where paths meet it gives way to the other path's value."""


NOT_ARRAY = NotArray()


@dataclass(frozen=True)
class DeviceList:
    """``jax.devices()``."""


@dataclass(frozen=True)
class DeviceRef:
    """``jax.devices()[i]``: putting a value there does not move it between memories."""


@dataclass(frozen=True)
class ProjectModule:
    """A module of the checked project: a file, a package's ``__init__.py``, or a namespace
    package's directory. Its attributes are what the module binds, or its submodules."""

    path: str


@dataclass(frozen=True)
class Ref:
    """An object outside the file, named by its canonical qualified name (``jax.numpy.sum``)."""

    qualname: str


@dataclass(frozen=True, eq=False)
class Function:
    """A ``def`` or ``lambda`` in the analysed file, with the scope it closes over."""

    node: Any
    scope: Any
    wrapper: str | None = None
    """``custom_jvp`` when decorated so: its body is traced inside a custom-derivative call."""


@dataclass(frozen=True, eq=False)
class Bound:
    """``functools.partial(f, *args, **kwargs)`` over a function of the file."""

    fn: Any
    args: tuple
    kwargs: tuple  # ((name, value), ...)


@dataclass(frozen=True, eq=False)
class Unpacked:
    """An option a ``**options`` argument of ``jax.jit`` passes (a decorator factory's
    ``**kwargs``, a dict of options): evaluated where it was unpacked, not a node."""

    value: Any


@dataclass(frozen=True, eq=False)
class JitOptions:
    """The options of a ``jax.jit`` call, kept as nodes with the scope of each (an option
    unpacked from ``**options``: its :class:`Unpacked` value, the ``**`` argument as its node)."""

    keywords: tuple = ()  # ((name, value node or Unpacked, scope, argument node), ...)

    def get(self, *names: str) -> tuple | None:
        """``(value node, scope)`` of the last option among ``names``, or None."""
        found = None
        for name, node, scope, _ in self.keywords:
            if name in names:
                found = (node, scope)
        return found

    def argument(self, *names: str) -> Any:
        """The whole argument (``in_shardings=...``) as written, for spans."""
        found = None
        for name, _, _, argument in self.keywords:
            if name in names:
                found = argument
        return found

    def merged(self, other: JitOptions) -> JitOptions:
        return JitOptions(self.keywords + other.keywords)


@dataclass(frozen=True, eq=False)
class Jitted:
    """A function under ``jax.jit`` with the jit's keyword arguments."""

    target: Any
    options: JitOptions


@dataclass(frozen=True, eq=False)
class JitFactory:
    """``functools.partial(jax.jit, ...)`` or ``jax.jit(**kwargs)``: applied to a function, jits it."""

    options: JitOptions


@dataclass(frozen=True, eq=False)
class Transform:
    """``jax.vmap(f)``, ``shard_map(f, ...)``, ``jax.checkpoint(f)``, ``compute_on(f, ...)``:
    calls trace ``f``."""

    kind: str
    fn: Any
    out_memory: Any = None
    """For ``host_compute``: the ``out_memory_spaces`` value, where JAX puts each output."""


@dataclass(frozen=True, eq=False)
class Differentiated:
    """``jax.grad(f, ...)`` / ``jax.value_and_grad(f, ...)``: calls trace ``f`` and return its
    value (with ``aux``) and gradients shaped like the differentiated arguments."""

    with_value: bool
    fn: Any
    argnums: Any
    has_aux: bool


@dataclass(frozen=True, eq=False)
class TransformFactory:
    """``functools.partial(shard_map, ...)`` used as a decorator."""

    kind: str
    out_memory: Any = None
    """As :attr:`Transform.out_memory`."""


@dataclass(frozen=True)
class Optimizer:
    """An optax ``GradientTransformation``; ``stateful``: whether its state holds moments an
    update reads (None: not known)."""

    stateful: bool | None


@dataclass(frozen=True, eq=False)
class DataclassType:
    """A class of the project: a ``@dataclass`` (a configuration, a training state), a
    ``NamedTuple``, or a plain class without bases (a model whose ``__init__`` sets attributes),
    with its fields' defaults (a plain class's: its class attributes) and its methods."""

    fields: tuple  # ((name, default value or UNKNOWN), ...) in declaration order
    methods: tuple = ()
    """``(name, how, Function)``; ``how``: ``self`` (bound to the instance), ``static``, ``property``."""
    plain: bool = False
    """Built by its ``__init__`` (not from its fields)."""

    def method(self, name: str) -> tuple | None:
        for entry in self.methods:
            if entry[0] == name:
                return entry
        return None


@dataclass(frozen=True)
class Instance:
    """An instance of a project class: the values its fields (attributes) were given."""

    fields: tuple  # ((name, value), ...)
    cls: Any = field(default=None, compare=False)
    """Its :class:`DataclassType`, for its methods (None: fields only, a sharding prefix tree's)."""

    def get(self, name: str) -> Any:
        for key, value in self.fields:
            if key == name:
                return value
        return None

    def with_field(self, name: str, value: Any) -> Instance:
        if self.get(name) is None:
            return replace(self, fields=self.fields + ((name, value),))
        return replace(self, fields=tuple((k, value if k == name else v) for k, v in self.fields))


@dataclass(frozen=True)
class ReplaceMethod:
    """``state.replace`` (flax.struct, chex) or ``state._replace`` (NamedTuple): called, a copy
    with the fields given changed."""

    instance: Instance


@dataclass(frozen=True)
class AtIndexer:
    """``x.at``."""

    base: Any


@dataclass(frozen=True)
class AtIndexed:
    """``x.at[i]``; its methods (``set``, ``add``...) compute on ``base`` and ``operands``."""

    base: Any
    operands: tuple


@dataclass(frozen=True)
class Repeated:
    """A Python iterable of unknown length whose every item is ``item`` (``zip`` over pytrees
    of layers, ``enumerate``, ``range``, a comprehension); ``nonempty``: known to have an item.
    Arrays repeated are a pytree of unknown structure instead (:func:`.iteration.repeated`)."""

    item: Any
    nonempty: bool = False


def map_leaves(value: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to every array leaf (host, device, unknown) of a pytree literal."""
    if isinstance(value, Instance):
        return replace(value, fields=tuple((k, map_leaves(v, fn)) for k, v in value.fields))
    if isinstance(value, Seq):
        return Seq(tuple(map_leaves(v, fn) for v in value.items), value.is_list)
    if isinstance(value, Mapping):
        return Mapping(tuple((k, map_leaves(v, fn)) for k, v in value.items))
    if value is NONE:
        return value
    return fn(value)


def after_each(value: Any, category: str, op: str, node: Any) -> Any:
    """Every host leaf of a pytree with one more operation (``category``) in its story."""
    return map_leaves(value, lambda leaf: leaf.after(category, op, node) if isinstance(leaf, HostArray) else leaf)


def leaves(value: Any):
    """Array-like leaves of a pytree literal, in no particular order."""
    if isinstance(value, Seq):
        for v in value.items:
            yield from leaves(v)
    elif isinstance(value, Instance):
        for _, v in value.fields:
            yield from leaves(v)
    elif isinstance(value, Mapping):
        for _, v in value.items:
            yield from leaves(v)
    elif isinstance(value, Repeated):
        yield from leaves(value.item)
    elif value is not NONE:
        yield value


def join(a: Any, b: Any) -> Any:
    """The value a name holds after two Python-level paths meet (``if``/loops)."""
    if a is b or a == b:
        return a
    if a is NOT_ARRAY or b is NOT_ARRAY:
        return b if a is NOT_ARRAY else a
    if isinstance(a, Seq) and isinstance(b, Seq) and len(a.items) == len(b.items) and a.is_list == b.is_list:
        return Seq(tuple(join(x, y) for x, y in zip(a.items, b.items)), a.is_list)
    if isinstance(a, Mapping) and isinstance(b, Mapping) and [k for k, _ in a.items] == [k for k, _ in b.items]:
        return Mapping(tuple((k, join(x, y)) for (k, x), (_, y) in zip(a.items, b.items)))
    if isinstance(a, Instance) and isinstance(b, Instance) and [k for k, _ in a.fields] == [k for k, _ in b.fields]:
        return replace(a, fields=tuple((k, join(x, y)) for (k, x), (_, y) in zip(a.fields, b.fields)))
    if isinstance(a, Repeated) and isinstance(b, Repeated):
        return Repeated(join(a.item, b.item), a.nonempty and b.nonempty)
    if isinstance(a, DeviceArray) and isinstance(b, DeviceArray):
        return DeviceArray(False, a.explicit or b.explicit, a.shaped and b.shaped)
    if isinstance(a, HostArray) and isinstance(b, HostArray) and _same_memory(a.origin, b.origin):
        # Host on both paths: whichever runs, the value is host; keep every operation seen
        # (and, from values moved to host apart, the first's origin, as a computation does,
        # unless it was only assumed from a test of the memory kind).
        first = b if a.origin.assumed and not b.origin.assumed else a
        return replace(
            first,
            steps=a.steps | b.steps,
            single=a.single and b.single,
            placement=a.placement if a.placement == b.placement else None,
            shard=a.shard and b.shard,
            shaped=a.shaped and b.shaped,
            scalar=a.scalar and b.scalar,
        )
    return UNKNOWN


def _same_memory(a: HostOrigin, b: HostOrigin) -> bool:
    """Origins a joined value can name either of: the same, or moved to the same memory in the
    same way on no condition."""
    if a == b:
        return True
    return (a.kind, a.memory_kind) == (b.kind, b.memory_kind) and a.condition is None and b.condition is None


def join_branches(taken: Any, not_taken: Any, test: Any) -> Any:
    """The value a name holds after ``if test:`` whose test the check cannot decide but which
    does not depend on the arrays themselves (a configuration flag): ``taken`` is the value
    when the test is true. Host on one branch and device on the other stays host, with the
    branch recorded, so that a finding can say when it holds. A value that is already
    conditional is not refined again: a second branch may be correlated with the first
    (``if offload: x = device_put(x, device)``), so it is unknown."""
    if (
        isinstance(taken, Seq)
        and isinstance(not_taken, Seq)
        and len(taken.items) == len(not_taken.items)
        and taken.is_list == not_taken.is_list
    ):
        return Seq(tuple(join_branches(a, b, test) for a, b in zip(taken.items, not_taken.items)), taken.is_list)
    if (
        isinstance(taken, Mapping)
        and isinstance(not_taken, Mapping)
        and [k for k, _ in taken.items] == [k for k, _ in not_taken.items]
    ):
        return Mapping(tuple((k, join_branches(a, b, test)) for (k, a), (_, b) in zip(taken.items, not_taken.items)))
    for host, other, holds in ((taken, not_taken, True), (not_taken, taken, False)):
        if isinstance(host, HostArray) and host.origin.condition is None and isinstance(other, (DeviceArray, Const)):
            origin = replace(host.origin, condition=Condition(test, holds))
            return replace(host, origin=origin, single=host.single and is_single_array(other))
        if (
            isinstance(host, ShardingSpec)
            and host.condition is None
            and host.memory_kind in HOST_KINDS
            and isinstance(other, ShardingSpec)
            and other.condition is None
            and other.memory_kind not in HOST_KINDS
        ):
            return ShardingSpec(host.memory_kind, Condition(test, holds))
    return join(taken, not_taken)


def is_single_array(value: Any) -> bool:
    """Whether a leaf is known to be exactly one array."""
    if isinstance(value, (DeviceArray, HostArray)):
        return value.single
    return isinstance(value, Const)
