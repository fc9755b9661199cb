"""What Python's iteration does to abstract values: ``for`` targets, comprehensions, and the
builtins that build or fold iterables (``zip``, ``enumerate``, ``range``, ``sum``...), plus
``jax.tree.leaves``.

JAX code loops over the layers of a parameter pytree in Python (``for w, b in zip(ws, bs)``)
and folds them (``sum(jnp.sum(g**2) for g in jax.tree.leaves(grads))``); those run at trace
time, so each item is traced. An iterable of known items (a tuple literal, a dict's
``items()``) is a :class:`~.values.Seq`; one of unknown length is a
:class:`~.values.Repeated` of the item every element is like, or, when that item is an
array, a pytree of unknown structure in that memory (what the check already makes of a
pytree argument: iterated, each item is such a subtree).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import libcst as cst

from .eager import Shard, Shards
from .evaluator import Evaluator
from .values import (
    NONE,
    STATIC,
    UNKNOWN,
    Const,
    DeviceArray,
    HostArray,
    Instance,
    Mapping,
    Repeated,
    Seq,
    join,
)

MAX_UNROLLED = 32
"""Items of a known iterable a comprehension evaluates one by one (else: one joined item)."""


def repeated(item: Any, nonempty: bool) -> Any:
    """An iterable of unknown length whose items are each ``item``."""
    if isinstance(item, (HostArray, DeviceArray)):
        return replace(item, single=False) if isinstance(item, HostArray) else DeviceArray(False, item.explicit)
    return Repeated(item, nonempty)


def element(iterated: Any) -> Any:
    """What a ``for`` over ``iterated`` binds on any iteration: each item of a pytree whose
    leaves are all in one memory is a subtree in that memory (the layers of a parameter list)."""
    if isinstance(iterated, (HostArray, DeviceArray)) and not iterated.single:
        return iterated
    if isinstance(iterated, Seq) and iterated.items:
        return functools.reduce(join, iterated.items)
    if isinstance(iterated, Repeated):
        return iterated.item
    if isinstance(iterated, Shards):
        return Shard(iterated.array)
    return UNKNOWN


def nonempty(iterated: Any) -> bool:
    """Whether a ``for`` over ``iterated`` runs at least once (a pytree of layers is taken to
    hold some: an empty one has nothing to report)."""
    if isinstance(iterated, Seq):
        return bool(iterated.items)
    if isinstance(iterated, Repeated):
        return iterated.nonempty
    return isinstance(iterated, (HostArray, DeviceArray)) and not iterated.single


def _known(iterated: Any) -> bool:
    return isinstance(iterated, (Seq, Repeated)) or (
        isinstance(iterated, (HostArray, DeviceArray)) and not iterated.single
    )


# ------------------------------------------------------------------ comprehensions
def comprehension(interp: Evaluator, node: Any, scope: Any, frame: Any) -> Any:
    """``[elt for ... in ...]`` (also generator, set and dict comprehensions): each item of a
    single ``for`` over a known tuple evaluated on its own; otherwise one item for all.
    ``frame`` is the comprehension's own (its targets), over ``scope``."""
    clauses = []
    clause = node.for_in
    while clause is not None:
        clauses.append(clause)
        clause = clause.inner_for_in
    first = interp.ev(clauses[0].iter, scope)
    is_dict = isinstance(node, cst.DictComp)
    exact = (
        len(clauses) == 1
        and not clauses[0].ifs
        and isinstance(first, Seq)
        and len(first.items) <= MAX_UNROLLED
        and not isinstance(node, cst.SetComp)
    )
    if exact:
        items = []
        for item in first.items:
            interp.assign(clauses[0].target, item, frame)
            items.append(_item(interp, node, frame))
        if not is_dict:
            return Seq(tuple(items), isinstance(node, cst.ListComp))
        if not all(isinstance(key, Const) and key is not STATIC for key, _ in items):
            return UNKNOWN
        return Mapping(tuple({key.value: value for key, value in items}.items()))
    every = True
    for index, clause in enumerate(clauses):
        iterated = first if index == 0 else interp.ev(clause.iter, frame)
        every = every and nonempty(iterated) and not clause.ifs
        interp.assign(clause.target, element(iterated) if _known(iterated) else UNKNOWN, frame)
        for condition in clause.ifs:
            interp.ev(condition.test, frame)
    item = _item(interp, node, frame)
    if is_dict:
        value = item[1]
        return repeated(value, every) if isinstance(value, (HostArray, DeviceArray)) else UNKNOWN
    if isinstance(node, cst.SetComp):
        return UNKNOWN
    return repeated(item, every)


def _item(interp: Evaluator, node: Any, frame: Any) -> Any:
    if isinstance(node, cst.DictComp):
        return interp.ev(node.key, frame), interp.ev(node.value, frame)
    return interp.ev(node.elt, frame)


# ------------------------------------------------------------------ builtins
def _zip(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if not args or set(kwargs) - {"strict"}:
        return UNKNOWN
    if all(isinstance(a, Seq) for a in args):
        length = min(len(a.items) for a in args)
        return Seq(tuple(Seq(tuple(a.items[i] for a in args)) for i in range(length)), True)
    return Repeated(Seq(tuple(element(a) if _known(a) else UNKNOWN for a in args)), all(nonempty(a) for a in args))


def _enumerate(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if len(args) != 1 or kwargs:
        return UNKNOWN
    iterated = args[0]
    if isinstance(iterated, Seq):
        return Seq(tuple(Seq((Const(i), item)) for i, item in enumerate(iterated.items)), True)
    return Repeated(Seq((STATIC, element(iterated) if _known(iterated) else UNKNOWN)), nonempty(iterated))


def _range(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if kwargs or not 1 <= len(args) <= 3:
        return UNKNOWN
    if args == [SOME_LENGTH]:
        return Repeated(STATIC, True)  # ``range(len(layers))``
    bounds = [a.value for a in args if isinstance(a, Const) and type(a.value) is int]
    return Repeated(STATIC, len(bounds) == len(args) and len(range(*bounds)) > 0)


def _reversed(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if len(args) != 1 or kwargs:
        return UNKNOWN
    if isinstance(args[0], Seq):
        return Seq(args[0].items[::-1], True)
    return args[0] if _known(args[0]) else UNKNOWN


def _iter(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    return args[0] if len(args) == 1 and not kwargs and _known(args[0]) else UNKNOWN


def _sorted(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    """The same items in an order the check does not follow."""
    if len(args) != 1 or set(kwargs) - {"key", "reverse"} or not _known(args[0]):
        return UNKNOWN
    return repeated(element(args[0]), nonempty(args[0]))


def _sequence(is_list: bool):
    def sequence(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        if kwargs or len(args) > 1:
            return UNKNOWN
        if not args:
            return Seq((), is_list)
        if isinstance(args[0], Seq):
            return Seq(args[0].items, is_list)
        if isinstance(args[0], Mapping):
            return Seq(tuple(Const(k) for k, _ in args[0].items), is_list)
        return args[0] if isinstance(args[0], Repeated) else UNKNOWN

    return sequence


def _sum(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    """``sum(items, start)``: ``start + item + item ...``, traced."""
    if not 1 <= len(args) <= 2 or set(kwargs) - {"start"}:
        return UNKNOWN
    total = args[1] if len(args) == 2 else kwargs.get("start", Const(0))
    iterated = args[0]
    if isinstance(iterated, Seq):
        for item in iterated.items:
            total = interp.binary(total, cst.Add(), item, node)
        return total
    if not _known(iterated):
        return UNKNOWN
    return interp.binary(total, cst.Add(), element(iterated), node)


class _SomeLength:
    """The length of a pytree of layers: unknown, but not zero (see :func:`nonempty`)."""

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "len>0"


SOME_LENGTH = Const(_SomeLength())


def _len(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if len(args) == 1 and isinstance(args[0], (Seq, Mapping)):
        return Const(len(args[0].items))
    if len(args) == 1 and nonempty(args[0]):
        return SOME_LENGTH
    return STATIC


def tree_leaves(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    """``jax.tree.leaves(tree)``: a pytree literal's leaves in JAX's order (dict keys sorted);
    with a pytree of unknown structure among them, leaves like all of them, of unknown number."""
    if len(args) != 1 or kwargs:
        return UNKNOWN
    found: list = []
    if not _flatten(args[0], found):
        return UNKNOWN
    if any(isinstance(leaf, (HostArray, DeviceArray)) and not leaf.single for leaf in found):
        return repeated(functools.reduce(join, found), True)
    return Seq(tuple(found), True)


def _flatten(value: Any, found: list) -> bool:
    if isinstance(value, Seq):
        return all(_flatten(item, found) for item in value.items)
    if isinstance(value, Instance):
        return all(_flatten(item, found) for _, item in value.fields)
    if isinstance(value, Mapping):
        try:
            ordered = sorted(value.items, key=lambda kv: kv[0])
        except TypeError:
            return False
        return all(_flatten(item, found) for _, item in ordered)
    if value is NONE:
        return True
    if isinstance(value, (HostArray, DeviceArray, Const)):
        found.append(value)
        return True
    return False


def mapping_method(receiver: Any, name: str, args: list) -> Any:
    """``d.items()``, ``d.values()``, ``d.keys()`` of a dict literal or of a pytree of unknown
    structure in one memory; None when ``name`` is not one of them."""
    if args or name not in ("items", "values", "keys"):
        return None
    if isinstance(receiver, Mapping):
        if name == "items":
            return Seq(tuple(Seq((Const(k), v)) for k, v in receiver.items), True)
        return Seq(tuple(v if name == "values" else Const(k) for k, v in receiver.items), True)
    if isinstance(receiver, (HostArray, DeviceArray)) and not receiver.single:
        if name == "items":
            return Repeated(Seq((STATIC, receiver)), True)
        return receiver if name == "values" else Repeated(STATIC, True)
    return None


BUILTINS = {
    "builtins.zip": _zip,
    "builtins.enumerate": _enumerate,
    "builtins.range": _range,
    "builtins.reversed": _reversed,
    "builtins.sorted": _sorted,
    "builtins.iter": _iter,
    "builtins.tuple": _sequence(False),
    "builtins.list": _sequence(True),
    "builtins.sum": _sum,
    "builtins.len": _len,
}
"""Handlers, keyed by qualified name, in the form of :data:`.jax_api.APIS`' calls."""
