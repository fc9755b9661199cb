"""The remat offload policies a traced program applies, read from its jaxpr: what each can
offload and whether the program offloads anything through it.

A policy whose names no ``checkpoint_name`` tags, whose rule matches no operation, whose
destination is device memory, or whose matches are all returned values (a scan carry) leaves
no move in the lowered module at all, so only the traced program shows it. JAX's remat is the
``remat2`` primitive in every version measured (0.6.2, 0.10.2, 0.12.0.1), its ``policy`` the
user's function, called by JAX as ``policy(primitive, *avals, **params)`` on each operation of
the checkpointed function; the residuals it offloads are ``device_put`` operations to host
memory whose results the remat takes. Private ``jax._src`` reads live here only.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

from offload_fixer.model import HOST_KINDS, RematPolicy, Span

REMAT_PRIMITIVES = frozenset({"remat2", "checkpoint"})
"""``jax.checkpoint``'s primitive: ``remat2`` from JAX 0.4 on (``checkpoint`` before)."""
NAME_PRIMITIVE = "name"
"""``checkpoint_name``'s primitive."""


def remat_policies(traced: Any) -> tuple[RematPolicy, ...]:
    """Every remat of ``traced`` (a ``jax.stages.Traced``) that has an offload policy, in
    program order; none where the JAX installed does not say (no ``jaxpr`` on its ``Traced``)."""
    closed = getattr(traced, "jaxpr", None)
    if closed is None:
        return ()
    jaxpr = getattr(closed, "jaxpr", closed)
    tagged: dict[str, Span | None] = {}
    for eqn, _, _ in _equations(jaxpr):
        if _is_name(eqn):
            tagged.setdefault(str(eqn.params["name"]), _span(eqn))
    moved = _moved_to_host(jaxpr)
    host_inputs = any(str(getattr(var.aval, "memory_space", "")).endswith("Host") for var in jaxpr.invars)
    found = []
    for eqn, scope, holders in _equations(jaxpr):
        policy = eqn.params.get("policy") if eqn.primitive.name in REMAT_PRIMITIVES else None
        if policy is None or not _may_offload(policy):
            continue
        # A remat that grad moved into a backward loop has no user frame: the loop's is where it is applied.
        span = next((where for held in (eqn, *reversed(holders)) if (where := _span(held)) is not None), None)
        found.append(_read(eqn, scope, policy, tagged, span, moved, host_inputs))
    return tuple(found)


def _moved_to_host(jaxpr: Any) -> list[Any]:
    """The operations whose results a ``device_put`` to host memory takes, anywhere in the
    program: where JAX put the residuals a policy offloads (in a loop's forward body, the
    stack the backward loop reads them from)."""
    moved: list[Any] = []
    producers_of: dict[int, dict[int, Any]] = {}
    for eqn, scope, _ in _equations(jaxpr):
        if eqn.primitive.name != "device_put" or not _to_host(eqn):
            continue
        producers = producers_of.get(id(scope))
        if producers is None:
            producers = producers_of[id(scope)] = {id(v): p for p in scope.eqns for v in p.outvars}
        moved.extend(producers[id(var)] for var in eqn.invars if id(var) in producers)
    return moved


def _equations(jaxpr: Any, holders: tuple[Any, ...] = ()) -> Iterator[tuple[Any, Any, tuple[Any, ...]]]:
    """Each equation of ``jaxpr`` and of the jaxprs its equations hold, with the jaxpr that
    holds it and the equations that hold that jaxpr, outermost first."""
    from jax._src import core

    for eqn in jaxpr.eqns:
        yield eqn, jaxpr, holders
        for sub in core.jaxprs_in_params(eqn.params):
            yield from _equations(sub, (*holders, eqn))


def _is_name(eqn: Any) -> bool:
    return bool(eqn.primitive.name == NAME_PRIMITIVE and "name" in eqn.params)


def _closure(policy: Any) -> dict[str, Any]:
    """The values a policy built by JAX's helpers closes over (``names_which_can_be_offloaded``,
    ``offload_dst``); empty for another callable."""
    try:
        return dict(inspect.getclosurevars(policy).nonlocals)
    except (TypeError, ValueError):
        return {}


def _may_offload(policy: Any) -> bool:
    """Whether the policy is one that offloads: JAX's offloading helpers, or a policy of the
    user's own that returns ``Offloadable`` for some operation (known only when called: a
    user policy counts when its source names ``Offloadable``)."""
    name = getattr(policy, "__qualname__", "")
    if "offload" in name:
        return True
    try:
        source = inspect.getsource(policy)
    except (OSError, TypeError):
        return False
    return "Offloadable" in source


def _read(
    eqn: Any,
    scope: Any,
    policy: Any,
    tagged: dict[str, Span | None],
    span: Span | None,
    moved: list[Any],
    host_inputs: bool,
) -> RematPolicy:
    body = eqn.params["jaxpr"]
    body = getattr(body, "jaxpr", body)
    producers = {id(var): producer for producer in scope.eqns for var in producer.outvars}
    residuals = [producers[id(var)] for var in eqn.invars if id(var) in producers]
    matched = to_host = 0
    for candidate in (*(inner for inner, _, _ in _equations(body)), *residuals):
        decision = _decide(policy, candidate)
        if decision is not None:
            matched += 1
            to_host += _sends_to_host(decision)
    closure = _closure(policy)
    names = closure.get("names_which_can_be_offloaded")
    destination = closure.get("offload_dst")
    if span is None and names:  # where a name it offloads is tagged
        span = next((tagged[name] for name in sorted(map(str, names)) if tagged.get(name)), None)
    return RematPolicy(
        span=span,
        policy=getattr(policy, "__qualname__", repr(policy)).split(".<locals>")[0],
        differentiated=bool(eqn.params.get("differentiated", True)),
        offloads=any(_sends_to_host(_decide(policy, producer)) for producer in moved),
        host_moves=bool(moved),
        matched=matched,
        matched_to_host=to_host,
        offload_names=tuple(sorted(map(str, names))) if names is not None else None,
        tagged_names=tuple(tagged),
        destination=str(destination) if destination is not None else None,
        host_inputs=host_inputs,
    )


def _decide(policy: Any, eqn: Any) -> Any:
    """The policy's decision on one operation, where it offloads it (an ``Offloadable``)."""
    try:
        decision = policy(eqn.primitive, *(var.aval for var in eqn.invars), **eqn.params)
    except Exception:  # noqa: BLE001 - a user policy that cannot take this operation decides nothing
        return None
    return decision if hasattr(decision, "dst") and hasattr(decision, "src") else None


def _sends_to_host(decision: Any) -> bool:
    return decision is not None and str(decision.dst) in HOST_KINDS


def _to_host(eqn: Any) -> bool:
    """A ``device_put`` whose destination is host memory (``MemorySpace.Host``, a sharding or
    ``TransferToMemoryKind`` of a host kind)."""
    for destination in eqn.params.get("devices", ()):
        kind = getattr(destination, "memory_kind", None)
        if kind in HOST_KINDS or str(destination).endswith("Host"):
            return True
    return False


def _span(eqn: Any) -> Span | None:
    """The first user frame of the remat: where the checkpointed function is called."""
    from jax._src import source_info_util

    source_info = eqn.source_info
    takes = next(iter(inspect.signature(source_info_util.user_frame).parameters))
    # JAX 0.10.2 and 0.12.0.1 take the traceback, 0.6.2 the source info itself.
    frame = source_info_util.user_frame(source_info.traceback if takes == "traceback" else source_info)
    if frame is None:
        return None
    column = getattr(frame, "start_column", 0) + 1
    return Span(frame.file_name, frame.start_line, column, function=frame.function_name)
