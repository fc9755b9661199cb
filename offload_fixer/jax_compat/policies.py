"""The remat offload policies a traced program applies, read from its jaxpr: what each can
offload and whether the program offloads anything through it.

A policy whose names no ``checkpoint_name`` tags, whose rule matches no operation, whose
destination is device memory, or whose matches are all returned values (a scan carry) leaves
no move in the lowered module at all, so only the traced program shows it. JAX's remat is the
``remat2`` primitive in every version measured (0.6.2, 0.10.2, 0.12.0.1; ``jax_remat3``'s form
is read too: :data:`REMAT3_NAME`), its ``policy`` the
user's function, called by JAX as ``policy(primitive, *avals, **params)`` on each operation of
the checkpointed function; the residuals it offloads are ``device_put`` operations to host
memory whose results the remat takes. Private ``jax._src`` reads live here only.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from offload_fixer.model import HOST_KINDS, RematPolicy, Span

REMAT_PRIMITIVES = frozenset({"remat2", "checkpoint"})
"""``jax.checkpoint``'s primitive: ``remat2`` from JAX 0.4 on (``checkpoint`` before)."""
NAME_PRIMITIVE = "name"
"""``checkpoint_name``'s primitive."""
HI_PRIMITIVE = "call_hi_primitive"
REMAT3 = "RematTraced"
REMAT3_NAME = "CheckpointName"
"""Under ``jax_remat3`` (JAX 0.12, off by default) ``jax.checkpoint`` is a ``call_hi_primitive``
holding a ``RematTraced`` (its ``jaxpr`` and ``policy``), and ``checkpoint_name`` one holding a
``CheckpointName`` (its ``name``). A differentiated remat leaves the primal computation, the
names and the moves to host in the forward program and a ``RematTraced`` in the backward one
(under the name stack ``rematted_computation``); an offloaded residual goes through
``reduce_precision`` before its move to host."""
DIFFERENTIATED_REMAT3 = "rematted_computation"


def remat_policies(traced: Any) -> tuple[RematPolicy, ...]:
    """Every remat of ``traced`` (a ``jax.stages.Traced``) that has an offload policy, in
    program order; none where the JAX installed does not say (no ``jaxpr`` on its ``Traced``)."""
    closed = getattr(traced, "jaxpr", None)
    if closed is None:
        return ()
    jaxpr = getattr(closed, "jaxpr", closed)
    tagged: dict[str, Span | None] = {}
    for eqn, _, _ in _equations(jaxpr):
        name = _name(eqn)
        if name is not None:
            tagged.setdefault(name, _span(eqn))
    moved = _moved_to_host(jaxpr)
    host_inputs = any(str(getattr(var.aval, "memory_space", "")).endswith("Host") for var in jaxpr.invars)
    found = []
    for eqn, scope, holders in _equations(jaxpr):
        remat = _remat(eqn)
        if remat is None or remat.policy is None or not _may_offload(remat.policy):
            continue
        # A remat that grad moved into a backward loop has no user frame: the loop's is where it is applied.
        span = next((where for held in (eqn, *reversed(holders)) if (where := _span(held)) is not None), None)
        found.append(_read(eqn, scope, remat, tagged, span, moved, host_inputs))
    return tuple(found)


@dataclass(frozen=True)
class _Remat:
    policy: Any
    body: Any
    """The checkpointed function's jaxpr (under ``jax_remat3``, differentiated: the backward
    program's recomputation)."""
    differentiated: bool


def _remat(eqn: Any) -> _Remat | None:
    """``jax.checkpoint`` as the equation holds it, in either implementation."""
    if eqn.primitive.name in REMAT_PRIMITIVES:
        return _Remat(eqn.params.get("policy"), eqn.params["jaxpr"], bool(eqn.params.get("differentiated", True)))
    held = _held(eqn, REMAT3)
    if held is None:
        return None
    differentiated = DIFFERENTIATED_REMAT3 in str(eqn.source_info.name_stack)
    return _Remat(held.params.get("policy"), held.params["jaxpr"], differentiated)


def _name(eqn: Any) -> str | None:
    """The name ``checkpoint_name`` gives a value, in either implementation."""
    if eqn.primitive.name == NAME_PRIMITIVE and "name" in eqn.params:
        return str(eqn.params["name"])
    held = _held(eqn, REMAT3_NAME)
    return str(held.params["name"]) if held is not None else None


def _held(eqn: Any, kind: str) -> Any:
    """The hi-primitive of kind ``kind`` a ``call_hi_primitive`` equation holds (remat3)."""
    held = eqn.params.get("_prim") if eqn.primitive.name == HI_PRIMITIVE else None
    return held if type(held).__name__ == kind else None


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
        for var in eqn.invars:
            producer = producers.get(id(var))
            while producer is not None and producer.primitive.name == "reduce_precision":  # remat3's, before the move
                producer = producers.get(id(producer.invars[0]))
            if producer is not None:
                moved.append(producer)
    return moved


def _equations(jaxpr: Any, holders: tuple[Any, ...] = ()) -> Iterator[tuple[Any, Any, tuple[Any, ...]]]:
    """Each equation of ``jaxpr`` and of the jaxprs its equations hold, with the jaxpr that
    holds it and the equations that hold that jaxpr, outermost first."""
    from jax._src import core

    for eqn in jaxpr.eqns:
        yield eqn, jaxpr, holders
        for sub in core.jaxprs_in_params(eqn.params):
            yield from _equations(sub, (*holders, eqn))
        held = _held(eqn, REMAT3)
        if held is not None:
            body = held.params["jaxpr"]
            yield from _equations(getattr(body, "jaxpr", body), (*holders, eqn))


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
    remat: _Remat,
    tagged: dict[str, Span | None],
    span: Span | None,
    moved: list[Any],
    host_inputs: bool,
) -> RematPolicy:
    policy = remat.policy
    body = getattr(remat.body, "jaxpr", remat.body)
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
        differentiated=remat.differentiated,
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
    """The policy's decision on one operation, where it offloads it (an ``Offloadable``); a
    remat3 name is asked as JAX asks it, ``policy(name_p, aval, name=...)``."""
    primitive, params = eqn.primitive, eqn.params
    held = _held(eqn, REMAT3_NAME)
    if held is not None:
        from jax._src.ad_checkpoint import name_p

        primitive, params = name_p, {"name": held.params["name"]}
    try:
        decision = policy(primitive, *(var.aval for var in eqn.invars), **params)
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
