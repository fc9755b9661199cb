"""OFL1200 host-value-device-output: a value in host memory reaches an output whose memory
kind is device (XLA error 1200)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.jax_compat import MEMORY_SPACE_APIS, Regime, Spelling
from offload_fixer.model import Diagnostic, FixOption
from offload_fixer.rules import FixDoc, Rule, ToolMessage, on_branch, origin_phrase, same_everywhere
from offload_fixer.rules.examples import by_regime

if TYPE_CHECKING:
    from offload_fixer.analysis.diagnose import Diagnoser
    from offload_fixer.analysis.offloader import Reach, Seed, WalkResult
    from offload_fixer.static.rules import StaticSite

HOST_OUTPUT_IN_SOURCE = ToolMessage(
    codes.HOST_VALUE_DEVICE_OUTPUT,
    "Output {output} of `{function}` receives a value in {memory_kind} memory but is declared device memory "
    "(XLA error 1200)",
)
"""OFL1200 from the source check, which has no XLA instruction names to quote."""

_INVALID_TYPED = """
def update(params, grads, momentum):
    momentum = 0.9 * momentum + grads
    params = params - 0.1 * momentum  # `params` was passed in host memory
    return params, jax.device_put(momentum, $HOST)


# Compiled ahead of time from shapes, as large training loops do: `params` is typed as
# device memory but arrives in host memory, and the update returns it as a device output.
f = jax.jit(update, in_shardings=($HOST_SHARDING, None, None))
args = (jax.ShapeDtypeStruct((8,), jnp.float32),) * 3
"""

_VALID_TYPED = """
def update(params, grads, momentum):
    params = jax.device_put(params, $DEVICE)  # streamed in from host memory first
    momentum = 0.9 * momentum + grads
    params = params - 0.1 * momentum
    return params, jax.device_put(momentum, $HOST)


f = jax.jit(update, in_shardings=($HOST_SHARDING, None, None))
args = (jax.ShapeDtypeStruct((8,), jnp.float32),) * 3
"""

_INVALID_OLDER = """
@jax.jit
def f(x):
    saved = jax.device_put(x * 2, $HOST)  # offloaded to host memory
    return saved + 1  # computed in host memory, returned as a device output


args = (jnp.ones(8),)
"""

_VALID_OLDER = """
@jax.jit
def f(x):
    saved = jax.device_put(x * 2, $HOST)
    return jax.device_put(saved, $DEVICE) + 1  # back on device before anything else


args = (jnp.ones(8),)
"""


def from_walk(d: Diagnoser, seed: Seed, walk: WalkResult) -> Iterator[Diagnostic]:
    """One OFL1200 per output the seed reaches unstreamed, naming the other outputs it reaches."""
    reaches = d.unstreamed_reaches(seed)
    seen_outputs: set[int] = set()
    for reach in reaches:
        if reach.output in seen_outputs:
            continue
        seen_outputs.add(reach.output)
        others = tuple(d.output_path(r.output) for r in reaches if r.output != reach.output)
        yield _host_output(d, reach, tuple(dict.fromkeys(others)))


def _host_output(d: Diagnoser, reach: Reach, related: tuple[str, ...]) -> Diagnostic:
    origin = d.origin(reach.seed)
    path = d.output_path(reach.output)
    shown_path = path or "(the whole result)"
    where = f"line {origin.span.line}" if origin.span else origin.detail
    explanation = (
        f"{origin_phrase(origin)} ({where}) flows to output {shown_path} without a move back "
        f"to device, but that output's memory kind is "
        f"'{d.view.results[reach.output].memory_kind}'. "
        f"XLA's host offloader rejects this on {d.target} (error 1200) when it compiles; "
        "either move the value back to device before it is returned, or declare this output's "
        'sharding with memory_kind="pinned_host".'
    )
    return Diagnostic(
        code=RULE.code,
        severity=RULE.severity(d.target),
        target=d.target,
        message=msg.OUTPUT_NOT_HOST.format(name=d.node_name(reach.starting)),
        explanation=explanation,
        output_index=reach.output,
        output_path=path,
        origin=origin,
        trace=d.trace(reach),
        span=origin.span,
        fixes=(RULE.fix_option("device"), RULE.fix_option("host")),
        function=d.function,
        related_outputs=related,
    )


def from_static(site: StaticSite) -> Iterator[Diagnostic]:
    """The source check's OFL1200: one per offending output leaf (none for a repaired one, nor
    for one JAX returns in device memory)."""
    if site.finding.repaired or site.finding.kept_on_device:
        return
    leaf = site.finding.leaf
    shown = site.output_path or "(the whole result)"
    message = HOST_OUTPUT_IN_SOURCE.format(
        output=shown, function=site.function.name, memory_kind=leaf.origin.memory_kind
    )
    explanation = _static_explanation(site)
    condition = site.condition()
    if condition is not None:
        branch, path, line = condition
        message += f" when {branch} ({path}:{line})"
        explanation = on_branch(branch, path, line, explanation)
    yield Diagnostic(
        code=RULE.code,
        severity=RULE.severity(site.target),
        target=site.target,
        message=message,
        explanation=explanation,
        output_index=site.finding.index,
        output_path=site.output_path,
        origin=site.origin,
        trace=site.trace(),
        span=site.origin.span,
        return_span=site.return_span,
        fixes=fix_options(leaf.origin.kind == "host_argument", site.spelling),
        function=site.function,
        related_outputs=site.related,
        source="static",
        source_sha256=site.source_sha256,
    )


def _static_explanation(site: StaticSite) -> str:
    leaf, spelling, target = site.finding.leaf, site.spelling, site.target
    version = spelling.version
    eager = site.finding.site.eager
    if eager is not None:
        text = f"Outside any jit, JAX {version} compiles `{eager.op}` on its own, with its operand in host memory, "
        if spelling.regime is not Regime.TYPED:
            text += "and declares every such result device memory (before 0.7.1)."
        elif leaf.shard:
            text += (
                "and types its result device memory: the operand is the data of one addressable shard "
                "of an array in host memory, which JAX types device memory though it stays on host."
            )
        else:
            text += "and declares its result device memory."
        return f"{text} XLA finds the host value returned through a device output. On {target}: {RULE.targets[target].outcome}."
    if spelling.regime is Regime.LEGACY:
        text = (
            f"JAX {version} (<= 0.4.28) never infers output memory kinds: an output is host memory "
            "only when out_shardings says so, so XLA finds a host value returned through a device output."
        )
    elif spelling.regime is Regime.PROPAGATION:
        lost = sorted({s.op for s in leaf.trace if s.role in ("compute", "noop_put", "cond_mixed")})
        text = (
            f"JAX {version} (0.4.29-0.7.0) propagates memory kinds only through device_put, scan and "
            f"copy; {', '.join(f'`{op}`' for op in lost)} lose the host kind, so the output is declared "
            "device memory while XLA keeps the value on host."
        )
    elif leaf.origin.kind == "host_argument":
        text = (
            f"The {leaf.origin.detail}, but when the function is traced with abstract "
            f"(ShapeDtypeStruct), NumPy or uncommitted arguments JAX {version} types it as device "
            "memory; XLA streams it from host and finds it returned through a device output. A source "
            "check cannot see the call site, so this is reported."
        )
    else:
        text = (
            f"JAX {version} types `unpinned_host` as device memory, but XLA treats the annotation as a "
            "move to host, so the value is on host and its output is declared device."
        )
    outcome = RULE.targets[target].outcome
    return f"{text} On {target}: {outcome}."


def fix_options(host_argument: bool, spelling: Spelling) -> tuple[FixOption, ...]:
    """The two remedies of this page, with how to make each spelled for the JAX version."""
    if spelling.memory_space is not None:
        move = f"`jax.device_put(x, {spelling.memory_space.device})`"
    else:
        move = (
            f"`jax.device_put(x, s.with_memory_kind({spelling.device_kind!r}))` with a sharding `s` the "
            f"code already uses (or `TransferToMemoryKind({spelling.device_kind!r})` where the file "
            "imports it)"
        )
    device = RULE.fix_option(
        "device",
        f"Return {move} instead of the host value. `jax.device_put(x, jax.devices()[0])`, "
        "`jax.device_put(x)` and `jnp.copy(x)` do not move it.",
    )
    host = RULE.fix_option(
        "host",
        f"Give this output an out_shardings leaf with memory_kind={spelling.host_kind!r} "
        f"(`NamedSharding(mesh, spec, memory_kind={spelling.host_kind!r})` or "
        f"`s.with_memory_kind({spelling.host_kind!r})`); never `{(spelling.memory_space or MEMORY_SPACE_APIS[-1]).host}`, which "
        "out_shardings rejects. Callers then receive this output in host memory.",
    )
    typed_argument = spelling.regime is Regime.TYPED and host_argument
    # In the >=0.7.1 abstract-argument gap the value is typed device and a same-space
    # device_put may be elided, so declaring the output host comes first there.
    return (host, device) if typed_argument else (device, host)


RULE = Rule(
    code=codes.HOST_VALUE_DEVICE_OUTPUT,
    summary="A value in host memory reaches an output whose memory kind is device",
    what_it_does=(
        "Follows every value that lives in host memory -- moved there with `device_put`, "
        "passed in through a host `in_shardings`, offloaded by a remat policy, or produced "
        "by host compute -- through the lowered program, the way XLA's host offloader "
        "walks it, and reports each output of the jitted function that such a value "
        "reaches while the output's memory kind is device."
    ),
    why_bad=(
        "XLA's host offloader walks from every move to host until the value is moved back "
        "to device, cut off by a slice that feeds a move to device, or returned. A value "
        "returned from host memory must be an output whose layout is host memory; "
        "otherwise the program does not compile. Which outputs JAX marks as host memory "
        "depends on the version: before 0.4.29 only `out_shardings` does; up to 0.7.0 a "
        "small propagation pass loses the kind through any compute, indexing, `cond`, "
        "`while` or nested `jit`; from 0.7.1 memory kinds are types, but arguments given a "
        "host `in_shardings` and traced from shapes are still typed as device memory."
    ),
    targets=same_everywhere("error", "compilation fails (error 1200)", msg.OUTPUT_NOT_HOST.placeholder()),
    fixes=(
        FixDoc(
            "device",
            "Move the value back to device before it is returned",
            "safe",
            "The output keeps the memory kind its callers already receive and the values "
            "are unchanged; the copy back to device is what XLA would need anyway. For an "
            "argument streamed from host (`in_shardings`) the move is written where the "
            "function starts, so the compute on it runs on device too; JAX keeps that move "
            "even where it types the argument as device memory (>= 0.7.1, traced from shapes).",
        ),
        FixDoc(
            "host",
            "Declare the output as host memory in `out_shardings`",
            "unsafe",
            "Callers then receive that output in host memory: code that computes on it "
            "outside the jitted function becomes slow or needs its own move to device. An "
            "explicit `out_shardings` also has to name a sharding for every output leaf.",
        ),
        FixDoc(
            None,
            "Pass committed arrays, or give every output an explicit memory kind, when "
            "compiling ahead of time with a host `in_shardings`",
            "display-only",
            "Which arguments should live in host memory is a design decision the tool "
            "cannot infer from the function alone.",
        ),
    ),
    applies_to="Every JAX version; which programs trigger it differs by version (see above)",
    invalid=(by_regime(_INVALID_TYPED, _INVALID_OLDER),),
    valid=(by_regime(_VALID_TYPED, _VALID_OLDER),),
    references=(
        "https://openxla.org/xla/errors/error_1200",
        "https://github.com/openxla/xla/pull/40519",
    ),
    from_walk=from_walk,
    from_static=from_static,
)
