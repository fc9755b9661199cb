"""From returned abstract values to Diagnostics: the trigger catalogue of docs/jax-versions.md.

A host leaf that reaches an output is an error when the output's memory kind is device, and
whether JAX declares it device depends on the regime, the origin and what happened on the way:

| origin / path                         | <=0.4.28 | 0.4.29-0.7.0 | >=0.7.1 |
|---------------------------------------|----------|--------------|---------|
| device_put to pinned_host, unchanged  | E        | ok           | ok      |
|   ... then compute/nested call/cond   | E        | E            | ok      |
|   ... then reshape/astype/.T (**)     | E        | undecided    | ok      |
|   ... then device_put without a kind  | E        | E            | ok      |
|   ... passed through a loop carry     | E        | (varies)     | ok      |
| device_put to unpinned_host           | E        | as pinned    | E (***) |
| in_shardings host                     | E        | as pinned    | E (*)   |

(*) when traced with abstract arguments, which a source check cannot rule out.
(**) JAX skips these when they change nothing (same shape, same dtype), and the kind survives.
(***) ok (OFL1204 alone) over a mesh whose axes are ``Explicit`` from 0.7.2 (:func:`kept_on_device`).
An explicit memory kind in ``out_shardings`` for the output makes every row ok; a ``None``
leaf does not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from offload_fixer.jax_compat import Regime, Spelling, xla_generation
from offload_fixer.model import (
    DEVICE_KINDS,
    HOST_MEMORY_SPACE_KINDS,
    UNPINNED_HOST,
    Diagnostic,
    FunctionRef,
    Origin,
    Role,
    Span,
    Step,
    format_output_path,
)
from offload_fixer.rules import all_rules

from .eager import COMPUTE, DECLARED_DEVICE, MIXED, EagerOperation
from .interpreter import ReturnedValue, SiteResult
from .jax_api import memory_kind_of
from .source import Sources
from .syntax import condition_key
from .values import NONE, UNKNOWN, HostArray, HostOrigin, Instance, Mapping, Seq, is_single_array

_ROLES = {
    "compute": Role.HOST_COMPUTE,
    "maybe_identity": Role.HOST_COMPUTE,
    "carry": Role.LOOP_CARRY,
    "copy": Role.COPY,
    "noop_put": Role.NOOP_MOVE,
    "cond_mixed": Role.MIXED_COND,
    "slice": Role.HOST_COMPUTE,
}
"""The interpreter's steps (:class:`~offload_fixer.static.values.Step`) in a trace's words."""


@dataclass(frozen=True)
class Finding:
    """One offending output leaf, before positions are known."""

    site: SiteResult
    returned: ReturnedValue
    keys: tuple
    index: int | None
    leaf: HostArray
    repaired: bool = False
    """The leaf is a move to host returned as the whole single output: XLA replaces the move
    with a copy to host and compiles it (no OFL1200), whatever JAX declares the output."""
    kept_on_device: bool = False
    """JAX returns the leaf in device memory: a move to ``unpinned_host`` over a mesh whose axes
    are ``Explicit`` (:func:`kept_on_device`); XLA compiles it (no OFL1200), though the move
    still offloads nothing (OFL1204)."""


def is_error(leaf: HostArray, spelling: Spelling) -> bool | None:
    """Whether the regime declares this host leaf's output device memory; None: undecidable.

    A result computed from host data and from a value moved to device memory is left
    undecided: JAX >= 0.7.1 returns such a result through a move to device (the device value
    carries an explicit memory space), and the check does not model older JAX's choice there.
    """
    if "explicit_device" in leaf.steps:
        return None
    origin = leaf.origin
    steps = leaf.steps
    if "slice" in steps:
        if (
            origin.kind == "host_argument"
            and steps == {"slice"}
            and xla_generation(spelling.version).slice_to_output_is_dma
        ):
            return False  # the version's compilers turn a returned slice of a host parameter into a DMA to device
        steps = (steps - {"slice"}) | {"compute"}
    typed_device = origin.kind == "host_argument" or (
        origin.memory_kind == UNPINNED_HOST and spelling.host_kind != UNPINNED_HOST
    )
    if spelling.regime is Regime.LEGACY:
        return True
    if spelling.regime is Regime.TYPED:
        if typed_device:
            return True
        return None if "cond_mixed" in steps else False
    if steps & {"compute", "noop_put", "cond_mixed"}:
        return True
    if steps & {"carry", "copy", "maybe_identity"}:
        return None
    return False


def kept_on_device(origin: HostOrigin, spelling: Spelling) -> bool:
    """Whether JAX returns a value moved to host by ``origin`` in device memory: a move to
    ``unpinned_host`` with a ``NamedSharding`` over a mesh whose axes are all ``Explicit``
    (``jax.make_mesh``'s default from JAX 0.9), in the JAX versions that type it device memory
    (:attr:`~offload_fixer.jax_compat.Spelling.explicit_mesh_keeps_unpinned_on_device`)."""
    if origin.kind != "move_to_host" or origin.memory_kind != UNPINNED_HOST:
        return False
    axes = spelling.make_mesh_axis_type if origin.mesh_axes == "make_mesh" else origin.mesh_axes
    return axes == "Explicit" and spelling.explicit_mesh_keeps_unpinned_on_device


@dataclass(frozen=True)
class HostCompute:
    """Computations on one host value of a jit site before any move back to device (OFL1201),
    or (``kind``) operations on it that JAX refuses (OFL1215) or no compiler builds (OFL1213)."""

    site: SiteResult
    origin: HostOrigin
    ops: tuple
    """``(op, node)`` in the order they were traced."""
    kind: str = COMPUTE
    """:data:`.eager.COMPUTE`, :data:`.eager.MIXED` or :data:`.eager.STRIDED`."""


def findings(site: SiteResult, spelling: Spelling) -> list[Finding | HostCompute]:
    """The outputs a host value reaches (OFL1200), then the host values computed on before any
    move back to device (OFL1201), as ``run`` reports them: whether or not the value also
    reaches an output. (A source check cannot tell whether XLA copies an updated host buffer
    that is returned and read, ``run``'s other OFL1201: that depends on whether JAX annotates
    the output's memory, which follows the sharding types of the caller's arguments.)"""
    found: list[Finding | HostCompute] = []
    for returned in site.returns:
        leaves = output_leaves(returned.value)
        for keys, leaf, index in leaves:
            if not isinstance(leaf, HostArray):
                continue
            if output_declaration(site.out_shardings, keys) != "unspecified":
                continue
            if is_error(leaf, spelling):
                repaired = len(leaves) == 1 and leaf.single and not leaf.steps and leaf.origin.kind == "move_to_host"
                found.append(
                    Finding(site, returned, keys, index, leaf, repaired, kept_on_device(leaf.origin, spelling))
                )
    by_origin: dict[HostOrigin, list] = {}
    for origin, op, node in site.host_computations:
        by_origin.setdefault(origin, []).append((op, node))
    found.extend(HostCompute(site, origin, tuple(ops)) for origin, ops in by_origin.items())
    found.extend(HostCompute(site, origin, ((op, node),), MIXED) for origin, op, node in site.refusals)
    return found


def eager_findings(operations: list[EagerOperation]) -> list[Finding | HostCompute]:
    """What ``run`` reports for each eager operation on a host array (:mod:`.eager`), as the
    findings of the jit JAX compiles around it: its result, declared device memory (OFL1200),
    or the operation itself (host compute, a refusal, a strided copy)."""
    found: list[Finding | HostCompute] = []
    for operation in operations:
        node, host = operation.node, operation.host
        if operation.kind == DECLARED_DEVICE:
            site = SiteResult(node, (ReturnedValue(node, host),), NONE, eager=operation)
            found.append(Finding(site, site.returns[0], (), 0, host))
        else:
            site = SiteResult(node, (), NONE, eager=operation)
            found.append(HostCompute(site, host.origin, ((operation.op, node),), operation.kind))
    return found


def output_leaves(value: Any) -> list[tuple]:
    """``(path keys, leaf, flat output index or None)`` in JAX's flattening order."""
    out: list[tuple] = []
    counter: list = [0]

    def walk(v: Any, keys: tuple) -> None:
        if isinstance(v, Seq):
            for i, item in enumerate(v.items):
                walk(item, keys + (("index", i),))
        elif isinstance(v, Instance):  # a registered dataclass or NamedTuple: its fields in order
            for name, item in v.fields:
                walk(item, keys + (("attr", name),))
        elif isinstance(v, Mapping):
            for key, item in sorted(v.items, key=lambda kv: (type(kv[0]).__name__, kv[0])):
                walk(item, keys + (("key", key),))
        elif v is not NONE:
            out.append((keys, v, counter[0]))
            counter[0] = counter[0] + 1 if counter[0] is not None and is_single_array(v) else None

    walk(value, ())
    return out


def output_declaration(out_shardings: Any, keys: tuple) -> str:
    """How ``out_shardings`` declares the output at ``keys``: ``unspecified`` (absent or a
    ``None`` leaf), ``explicit`` (a memory kind), or ``unknown``."""
    tree = out_shardings
    for kind, key in keys:
        if tree is NONE:
            return "unspecified"
        if isinstance(tree, Seq) and kind == "index" and 0 <= key < len(tree.items):
            tree = tree.items[key]
        elif isinstance(tree, Mapping) and kind == "key" and tree.get(key) is not None:
            tree = tree.get(key)
        elif isinstance(tree, (Seq, Mapping, Instance)) or tree is UNKNOWN:
            return "unknown"
        else:
            break  # one sharding for the whole subtree
    return _subtree_declaration(tree)


def _subtree_declaration(tree: Any) -> str:
    if tree is NONE:
        return "unspecified"
    if isinstance(tree, (Seq, Mapping)):
        items = tree.items if isinstance(tree, Seq) else [v for _, v in tree.items]
        found = {_subtree_declaration(item) for item in items} or {"unspecified"}
        return found.pop() if len(found) == 1 else "unknown"
    kind = memory_kind_of(tree)
    if kind in HOST_MEMORY_SPACE_KINDS or kind in DEVICE_KINDS:
        return "explicit"
    return "unknown"  # unpinned_host outputs are not host memory to XLA: left to `run`


# ---------------------------------------------------------------------------------------
# Diagnostics
def diagnostics(
    found: list[Finding | HostCompute], source: Sources, target: str, spelling: Spelling
) -> list[Diagnostic]:
    """Turn findings into Diagnostics, as the dynamic analysis words them: one OFL1200 per
    offending output (a repaired one, or one JAX keeps on device, has none), and one OFL1204
    per ``unpinned_host`` move that reaches an output.

    ``source`` gives the file and code range of the findings' nodes; each diagnostic carries
    the hash of the file of its jitted function, which a fix edits.
    """
    span = _Spans(source)
    result = _host_computations([f for f in found if isinstance(f, HostCompute)], source, span, target, spelling)
    outputs = [f for f in found if isinstance(f, Finding)]
    related: dict[tuple, list[str]] = {}
    for f in outputs:
        related.setdefault((id(f.returned), id(f.leaf.origin)), []).append(format_output_path(f.keys))

    seen: set[tuple[object, ...]] = set()
    hooks = [rule.from_static for rule in all_rules() if rule.from_static is not None]
    for f in outputs:
        output_path = format_output_path(f.keys)
        function = _function_ref(f.site, source)
        source_sha256 = source.sha256_of(f.site.function)
        origin = _origin(f.leaf.origin, span, function.name)
        return_span = span(f.returned.node)
        if (origin.key, return_span, output_path) in seen:
            continue  # one function jitted at several sites, or a pytree reached twice
        seen.add((origin.key, return_span, output_path))
        others = tuple(p for p in related[(id(f.returned), id(f.leaf.origin))] if p != output_path)
        site = StaticSite(
            f, function, origin, output_path, return_span, others, target, spelling, source_sha256, span, seen
        )
        for hook in hooks:
            made = hook(site)
            # An eager operation's findings point at the operation, as ``run`` points them at
            # the user's line of the jit JAX compiled for it.
            result.extend(made if f.site.eager is None else (replace(d, span=return_span) for d in made))
    return result


@dataclass(frozen=True)
class StaticSite:
    """One offending output leaf, located: what each rule's ``from_static`` hook is handed."""

    finding: Finding
    function: FunctionRef
    origin: Origin
    output_path: str
    return_span: Span
    related: tuple[str, ...]
    """The other outputs the same host value reaches."""
    target: str
    spelling: Spelling
    source_sha256: str | None
    spans: _Spans
    seen: set[tuple[object, ...]]
    """What the hooks have reported for this check, shared by its sites."""

    def first(self, code: str) -> bool:
        """Whether this is the first ``code`` reported for this site's origin (and record it)."""
        key = (self.origin.key, code)
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    def trace(self) -> tuple[Step, ...]:
        """The move to host (or the host argument), each step the leaf took, then the return."""
        leaf = self.finding.leaf
        steps: tuple[Step, ...] = (_start(leaf.origin, self.origin, self.spans),)
        steps += tuple(Step(s.op, _ROLES.get(s.role, s.role), self.spans(s.node)) for s in leaf.trace)
        return steps + (Step("return", Role.OUTPUT, self.return_span),)

    def condition(self) -> tuple[str, str, int] | None:
        """``(branch in words, path, line)`` where the value is host memory on one branch only."""
        return _condition(self.finding.leaf.origin, self.spans)


@dataclass(frozen=True)
class StaticHostCompute:
    """One host value of a jit site that meets computations before any move back to device,
    located: what each rule's ``from_static_compute`` hook is handed, as ``from_walk`` is
    handed a walked seed."""

    finding: HostCompute
    function: FunctionRef
    origin: Origin
    start: Step
    """The move to host, or the host argument's ``in_shardings``."""
    ops: tuple[tuple[str, Span], ...]
    """Each computation, in the order traced, where it is."""
    elsewhere: tuple[str, ...]
    """``path:line`` of the computations on other lines than the first's, as the user gave the paths."""
    condition: tuple[str, str, int] | None
    """As :meth:`StaticSite.condition`."""
    target: str
    spelling: Spelling
    source_sha256: str | None
    kind: str = COMPUTE
    """:data:`.eager.COMPUTE` (OFL1201), :data:`.eager.MIXED` (OFL1215), :data:`.eager.STRIDED` (OFL1213)."""


def _host_computations(
    found: list[HostCompute], source: Sources, span: _Spans, target: str, spelling: Spelling
) -> list[Diagnostic]:
    """Each rule's ``from_static_compute`` hook on each host value computed on, once per host
    value and place (one function jitted at several sites is reported once)."""
    hooks = [rule.from_static_compute for rule in all_rules() if rule.from_static_compute is not None]
    out: list[Diagnostic] = []
    seen: set[tuple] = set()
    for f in found:
        node = f.site.function
        function = _function_ref(f.site, source)
        origin = _origin(f.origin, span, function.name)
        ops = tuple((op, span(n)) for op, n in f.ops)
        key = (origin.key, ops[0][1], f.kind, f.site.eager is None)  # a traced op and the same op run eagerly
        if key in seen:
            continue
        seen.add(key)
        elsewhere = sorted({(_display(s.path), s.line) for _, s in ops[1:] if s.line != ops[0][1].line})
        site = StaticHostCompute(
            f,
            function,
            origin,
            _start(f.origin, origin, span),
            ops,
            tuple(f"{path}:{line}" for path, line in elsewhere),
            _condition(f.origin, span),
            target,
            spelling,
            source.sha256_of(node),
            f.kind,
        )
        for hook in hooks:
            out.extend(hook(site))
    return out


def _function_ref(site: SiteResult, source: Sources) -> FunctionRef:
    """The jitted function a finding is in, or (eager code) the operation JAX jits, named as
    ``run`` names it (``multiply (eager)``) at the line it is written on."""
    node = site.function
    name = f"{site.eager.op} (eager)" if site.eager is not None else _function_name(node)
    return FunctionRef(name, source.path_of(node), source.code_range(node).start.line)


def _start(host: HostOrigin, origin: Origin, spans: _Spans) -> Step:
    """A trace's first step: the move to host, or the ``in_shardings`` that declares the argument."""
    if host.kind == "move_to_host":
        return Step("device_put", Role.MOVE_TO_HOST, origin.span)
    return Step("in_shardings", Role.HOST_ARGUMENT, spans(host.declared_at))


def _condition(host: HostOrigin, spans: _Spans) -> tuple[str, str, int] | None:
    condition = host.condition
    if condition is None:
        return None
    (test, positive), where = condition_key(condition.test), spans(condition.test)
    return f"`{test}` is {'true' if condition.holds == positive else 'false'}", _display(where.path), where.line


class _Spans:
    """1-based spans of libcst nodes (end column exclusive, as SARIF's), each naming the
    innermost ``def`` that contains it."""

    def __init__(self, source: Sources) -> None:
        self.source = source

    def __call__(self, node: Any) -> Span:
        code_range = self.source.code_range(node)
        start, end = _bounds(code_range)
        functions = ((_bounds(r), name) for r, name in self.source.functions_around(node))
        containing = [(bounds, name) for bounds, name in functions if bounds[0] <= start and end <= bounds[1]]
        function = max(containing)[1] if containing else None
        return Span(
            self.source.path_of(node),
            code_range.start.line,
            code_range.start.column + 1,
            code_range.end.line,
            code_range.end.column + 1,
            function,
        )


def _bounds(code_range: Any) -> tuple:
    return (code_range.start.line, code_range.start.column), (code_range.end.line, code_range.end.column)


def _origin(host: HostOrigin, span: _Spans, function: str) -> Origin:
    """A move to host is located at its ``device_put``; a host argument, as the dynamic
    analysis does, at the jit site's ``in_shardings=`` in the name of the jitted function,
    with JAX's label for the leaf (by which the fix planner finds the parameter)."""
    where = span(host.node)
    if host.kind == "host_argument":
        where = replace(where, function=function)
    return Origin(
        kind=host.kind,
        memory_kind=host.memory_kind,
        span=where,
        detail=host.detail,
        key=f"{where.path}:{where.line}:{where.col}" + (f":{host.argument}" if host.argument else ""),
        argument=host.argument,
    )


def _display(path: str) -> str:
    """A path as the user gave it: relative to the current directory when under it."""
    if not os.path.isabs(path):
        return path
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _function_name(node: Any) -> str:
    return getattr(getattr(node, "name", None), "value", "<lambda>")
