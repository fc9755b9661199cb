"""From returned abstract values to Diagnostics: the trigger catalogue of jax-versions.md.

A host leaf that reaches an output is an error when the output's memory kind is device, and
whether JAX declares it device depends on the regime, the origin and what happened on the way:

| origin / path                         | <=0.4.28 | 0.4.29-0.7.0 | >=0.7.1 |
|---------------------------------------|----------|--------------|---------|
| device_put to pinned_host, unchanged  | E        | ok           | ok      |
|   ... then compute/nested call/cond   | E        | E            | ok      |
|   ... then reshape/astype/.T (**)     | E        | undecided    | ok      |
|   ... then device_put without a kind  | E        | E            | ok      |
|   ... passed through a loop carry     | E        | (varies)     | ok      |
| device_put to unpinned_host           | E        | as pinned    | E       |
| in_shardings host                     | E        | as pinned    | E (*)   |

(*) when traced with abstract arguments, which a source check cannot rule out.
(**) JAX skips these when they change nothing (same shape, same dtype), and the kind survives.
An explicit
memory kind in ``out_shardings`` for the output makes every row ok; a ``None`` leaf does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst

from offload_fixer.jax_compat import Regime, Spelling
from offload_fixer.model import Diagnostic, FixOption, FunctionRef, Origin, Span, Step, format_output_path

from . import names
from .interpreter import ReturnedValue, SiteResult, memory_kind_of
from .values import NONE, UNKNOWN, HostArray, Mapping, Seq, is_single_array

_ROLES = {
    "compute": "host compute",
    "maybe_identity": "host compute unless JAX skips it",
    "carry": "loop carry",
    "copy": "copy",
    "noop_put": "device_put that does not move it",
    "cond_mixed": "cond with a device branch",
}


@dataclass(frozen=True)
class Finding:
    """One offending output leaf, before positions are known."""

    site: SiteResult
    returned: ReturnedValue
    keys: tuple
    index: int | None
    leaf: HostArray


def is_error(leaf: HostArray, spelling: Spelling) -> bool | None:
    """Whether the regime declares this host leaf's output device memory; None: undecidable."""
    origin = leaf.origin
    typed_device = origin.kind == "host_argument" or (
        origin.memory_kind == "unpinned_host" and spelling.host_kind != "unpinned_host"
    )
    if spelling.regime is Regime.LEGACY:
        return True
    if spelling.regime is Regime.TYPED:
        if typed_device:
            return True
        return None if "cond_mixed" in leaf.steps else False
    if leaf.steps & {"compute", "noop_put", "cond_mixed"}:
        return True
    if leaf.steps & {"carry", "copy", "maybe_identity"}:
        return None
    return False


def findings(site: SiteResult, spelling: Spelling) -> list[Finding]:
    found = []
    for returned in site.returns:
        for keys, leaf, index in output_leaves(returned.value):
            if not isinstance(leaf, HostArray):
                continue
            if output_declaration(site.out_shardings, keys) != "unspecified":
                continue
            if is_error(leaf, spelling):
                found.append(Finding(site, returned, keys, index, leaf))
    return found


def output_leaves(value: Any) -> list[tuple]:
    """``(path keys, leaf, flat output index or None)`` in JAX's flattening order."""
    out: list[tuple] = []
    counter: list = [0]

    def walk(v: Any, keys: tuple) -> None:
        if isinstance(v, Seq):
            for i, item in enumerate(v.items):
                walk(item, keys + (("index", i),))
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
        elif isinstance(tree, (Seq, Mapping)) or tree is UNKNOWN:
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
    if kind in names.HOST_KINDS or kind in names.DEVICE_KINDS:
        return "explicit"
    return "unknown"


# ---------------------------------------------------------------------------------------
# Diagnostics
def diagnostics(found: list[Finding], positions: Any, path: str, target: str, spelling: Spelling) -> list[Diagnostic]:
    """Turn findings into Diagnostics; ``positions`` maps libcst nodes to code ranges."""
    span = _Spans(positions, path)
    related: dict[tuple, list[str]] = {}
    for f in found:
        related.setdefault((id(f.returned), id(f.leaf.origin)), []).append(format_output_path(f.keys))

    seen = set()
    result = []
    for f in found:
        output_path = format_output_path(f.keys)
        origin_span = span(f.leaf.origin.node)
        return_span = span(f.returned.node)
        identity = (origin_span, return_span, output_path)
        if identity in seen:
            continue
        seen.add(identity)
        function = FunctionRef(_function_name(f.site.function), path, positions[f.site.function].start.line)
        others = tuple(p for p in related[(id(f.returned), id(f.leaf.origin))] if p != output_path)
        result.append(_diagnostic(f, function, output_path, origin_span, return_span, span, target, spelling, others))
    return result


class _Spans:
    """1-based spans of libcst nodes (end column exclusive, as SARIF's), each naming the
    innermost ``def`` that contains it."""

    def __init__(self, positions: Any, path: str) -> None:
        self.positions = positions
        self.path = path
        self.functions = [(_bounds(r), node.name.value) for node, r in positions.items()
                          if isinstance(node, cst.FunctionDef)]

    def __call__(self, node: Any) -> Span:
        code_range = self.positions[node]
        start, end = _bounds(code_range)
        containing = [(bounds, name) for bounds, name in self.functions if bounds[0] <= start and end <= bounds[1]]
        function = max(containing)[1] if containing else None
        return Span(self.path, code_range.start.line, code_range.start.column + 1,
                    code_range.end.line, code_range.end.column + 1, function)


def _bounds(code_range: Any) -> tuple:
    return (code_range.start.line, code_range.start.column), (code_range.end.line, code_range.end.column)


def _diagnostic(f: Finding, function: FunctionRef, output_path: str, origin_span: Span, return_span: Span,
                span: Any, target: str, spelling: Spelling, related: tuple) -> Diagnostic:
    leaf = f.leaf
    code = "OFL1204" if leaf.origin.memory_kind == "unpinned_host" and spelling.host_kind != "unpinned_host" \
        else "OFL1200"
    origin = Origin(kind=leaf.origin.kind, memory_kind=leaf.origin.memory_kind, span=origin_span,
                    detail=leaf.origin.detail, key=f"{origin_span.path}:{origin_span.line}:{origin_span.col}")
    first = Step("device_put" if leaf.origin.kind == "move_to_host" else "in_shardings",
                 "move to host" if leaf.origin.kind == "move_to_host" else "host argument", origin_span)
    steps = (first,) + tuple(Step(s.op, _ROLES.get(s.role, s.role), span(s.node)) for s in leaf.trace)
    steps += (Step("return", "output", return_span),)
    label = f"result{output_path}"
    message = (f"{leaf.origin.memory_kind} value reaches output `{label}` of `{function.name}`, "
               f"whose memory kind is device (XLA error 1200)")
    return Diagnostic(
        code=code,
        severity="warning" if target == "gpu" else "error",
        target=target,
        message=message,
        explanation=_explanation(leaf, spelling, target),
        output_index=f.index,
        output_path=output_path,
        origin=origin,
        trace=steps,
        span=origin_span,
        return_span=return_span,
        fixes=fix_options(leaf, spelling),
        function=function,
        related_outputs=related,
        source="static",
    )


def _explanation(leaf: HostArray, spelling: Spelling, target: str) -> str:
    version = spelling.version
    if spelling.regime is Regime.LEGACY:
        text = (f"JAX {version} (<= 0.4.28) never infers output memory kinds: an output is host memory "
                "only when out_shardings says so, so XLA finds a host value returned through a device output.")
    elif spelling.regime is Regime.PROPAGATION:
        lost = sorted({s.op for s in leaf.trace if s.role in ("compute", "noop_put", "cond_mixed")})
        text = (f"JAX {version} (0.4.29-0.7.0) propagates memory kinds only through device_put, scan and "
                f"copy; {', '.join(f'`{op}`' for op in lost)} lose the host kind, so the output is declared "
                "device memory while XLA keeps the value on host.")
    elif leaf.origin.kind == "host_argument":
        text = (f"{leaf.origin.detail}, but when the function is traced with abstract (ShapeDtypeStruct), "
                f"NumPy or uncommitted arguments JAX {version} types it as device memory; XLA streams it from "
                "host and finds it returned through a device output. A source check cannot see the call "
                "site, so this is reported.")
    else:
        text = (f"JAX {version} types `unpinned_host` as device memory, but XLA treats the annotation as a "
                "move to host, so the value is on host and its output is declared device.")
    if target == "gpu":
        text += (" On GPU the newest XLA instead returns this output in host memory (layout updated) "
                 "without an error; older XLA fails.")
    return text


def fix_options(leaf: HostArray, spelling: Spelling) -> tuple[FixOption, ...]:
    """The two remedies of jax-versions.md, spelled for the regime."""
    if spelling.memory_space_api:
        move = "`jax.device_put(x, jax.memory.Space.Device)`"
    else:
        move = (f"`jax.device_put(x, s.with_memory_kind({spelling.device_kind!r}))` with a sharding `s` the "
                f"code already uses (or `TransferToMemoryKind({spelling.device_kind!r})` where the file "
                "imports it)")
    device = FixOption(
        "device",
        "Move the value back to device memory before returning it",
        f"Return {move} instead of the host value. `jax.device_put(x, jax.devices()[0])`, "
        "`jax.device_put(x)` and `jnp.copy(x)` do not move it.",
    )
    host = FixOption(
        "host",
        "Declare the output as host memory",
        f"Give this output an out_shardings leaf with memory_kind={spelling.host_kind!r} "
        f"(`NamedSharding(mesh, spec, memory_kind={spelling.host_kind!r})` or "
        f"`s.with_memory_kind({spelling.host_kind!r})`); never `jax.memory.Space.Host`, which "
        "out_shardings rejects. Callers then receive this output in host memory.",
        safety="unsafe",
    )
    typed_argument = spelling.regime is Regime.TYPED and leaf.origin.kind == "host_argument"
    # In the >=0.7.1 abstract-argument gap the value is typed device and a same-space
    # device_put may be elided, so declaring the output host comes first there.
    return (host, device) if typed_argument else (device, host)


def _function_name(node: Any) -> str:
    return getattr(getattr(node, "name", None), "value", "<lambda>")
