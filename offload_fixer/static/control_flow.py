"""What ``lax.scan``, ``lax.map``, ``while_loop``, ``fori_loop``, ``cond`` and ``switch`` do to
memory kinds: their bodies are traced once on abstract carries and slices, and the results
say where each leaf of the carry, the stacked outputs and the branches' results live.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from .evaluator import ABSENT, Evaluator, call_argument
from .values import (
    DEVICE_LEAF,
    NONE,
    UNKNOWN,
    Const,
    DeviceArray,
    HostArray,
    Mapping,
    Seq,
    after_each,
    is_single_array,
    map_leaves,
)


def scan(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    body = call_argument(args, kwargs, 0, "f")
    init = call_argument(args, kwargs, 1, "init")
    xs = call_argument(args, kwargs, 2, "xs", NONE)
    if body is ABSENT or init is ABSENT:
        return UNKNOWN
    carry = _enter_carry(init, node)
    out = interp.apply(body, [carry, map_leaves(xs, functools.partial(_slice, node=node))], {}, node, scope)
    if not isinstance(out, Seq) or len(out.items) != 2:
        return UNKNOWN
    return Seq((_carry_result(carry, out.items[0]), map_leaves(out.items[1], _stacked)))


def lax_map(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    body = call_argument(args, kwargs, 0, "f")
    xs = call_argument(args, kwargs, 1, "xs")
    if body is ABSENT or xs is ABSENT:
        return UNKNOWN
    sliced = map_leaves(xs, functools.partial(_slice, node=node))
    return map_leaves(interp.apply(body, [sliced], {}, node, scope), _stacked)


def while_loop(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    body = call_argument(args, kwargs, 1, "body_fun")
    init = call_argument(args, kwargs, 2, "init_val")
    if body is ABSENT or init is ABSENT:
        return UNKNOWN
    carry = _enter_carry(init, node)
    return _carry_result(carry, interp.apply(body, [carry], {}, node, scope))


def fori_loop(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    body = call_argument(args, kwargs, 2, "body_fun")
    init = call_argument(args, kwargs, 3, "init_val")
    if body is ABSENT or init is ABSENT:
        return UNKNOWN
    carry = _enter_carry(init, node)
    return _carry_result(carry, interp.apply(body, [UNKNOWN, carry], {}, node, scope))


def cond(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if len(args) < 3 or kwargs:
        return UNKNOWN
    branches = [interp.apply(branch, list(args[3:]), {}, node, scope) for branch in args[1:3]]
    return _merge_branches(branches, node)


def switch(interp: Evaluator, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
    if len(args) < 2 or kwargs or not isinstance(args[1], Seq) or not args[1].items:
        return UNKNOWN
    branches = [interp.apply(branch, list(args[2:]), {}, node, scope) for branch in args[1].items]
    return _merge_branches(branches, node)


def _enter_carry(init: Any, node: Any) -> Any:
    return after_each(init, "carry", "loop carry", node)


def _slice(leaf: Any, node: Any) -> Any:
    """One iteration's slice of a scanned-over leaf. A slice of host data is still host data;
    XLA streams it when it only feeds a move to device, so the slice alone decides nothing."""
    if isinstance(leaf, DeviceArray):
        return leaf
    if isinstance(leaf, HostArray):
        sliced = leaf.after("maybe_identity", "scan slice", node)
        return replace(sliced, single=leaf.single)
    return UNKNOWN


def _stacked(leaf: Any) -> Any:
    """Per-iteration results stacked by scan/map: a host ``y`` gives host ``ys``."""
    if isinstance(leaf, (HostArray, DeviceArray)):
        return leaf
    return DEVICE_LEAF if isinstance(leaf, Const) else UNKNOWN


def _carry_result(carry_in: Any, carry_out: Any) -> Any:
    """A loop's final carry: an unchanged host carry stays host, a device one stays device."""
    if carry_out is carry_in:
        return carry_in
    if isinstance(carry_in, Seq) and isinstance(carry_out, Seq) and len(carry_in.items) == len(carry_out.items):
        return Seq(tuple(_carry_result(a, b) for a, b in zip(carry_in.items, carry_out.items)), carry_in.is_list)
    if (
        isinstance(carry_in, Mapping)
        and isinstance(carry_out, Mapping)
        and [k for k, _ in carry_in.items] == [k for k, _ in carry_out.items]
    ):
        return Mapping(tuple((k, _carry_result(a, b)) for (k, a), (_, b) in zip(carry_in.items, carry_out.items)))
    if isinstance(carry_in, (DeviceArray, Const)) and isinstance(carry_out, (DeviceArray, Const)):
        return DeviceArray(False, any(getattr(c, "explicit", False) for c in (carry_in, carry_out)))
    if isinstance(carry_out, HostArray) and (
        isinstance(carry_in, (DeviceArray, Const))
        or (isinstance(carry_in, HostArray) and carry_in.origin == carry_out.origin)
    ):
        # Computed from host data in the body: host from the first iteration on, and every
        # later one computes on it there (the walk of XLA's host offloader through the loop).
        steps = carry_out.steps | (carry_in.steps if isinstance(carry_in, HostArray) else frozenset())
        return replace(carry_out, steps=steps | {"carry"})
    return UNKNOWN


def _merge_branches(values: list, node: Any) -> Any:
    """The result of ``cond``/``switch``: host if a branch returns host at that leaf."""
    first = values[0]
    if all(isinstance(v, Seq) and len(v.items) == len(first.items) for v in values):
        return Seq(
            tuple(_merge_branches([v.items[i] for v in values], node) for i in range(len(first.items))), first.is_list
        )
    if all(isinstance(v, Mapping) and [k for k, _ in v.items] == [k for k, _ in first.items] for v in values):
        return Mapping(
            tuple((k, _merge_branches([v.items[i][1] for v in values], node)) for i, (k, _) in enumerate(first.items))
        )
    if all(v is NONE for v in values):
        return NONE
    if not all(isinstance(v, (HostArray, DeviceArray, Const)) for v in values):
        return UNKNOWN
    hosts = [v for v in values if isinstance(v, HostArray)]
    if not hosts:
        return DeviceArray(
            all(is_single_array(v) for v in values), any(isinstance(v, DeviceArray) and v.explicit for v in values)
        )
    if len({(h.origin.kind, h.origin.memory_kind) for h in hosts}) > 1:
        return UNKNOWN
    merged = hosts[0]
    for other in hosts[1:]:
        merged = replace(merged, steps=merged.steps | other.steps, single=merged.single and other.single)
    return merged.after("compute" if len(hosts) == len(values) else "cond_mixed", "cond", node)
