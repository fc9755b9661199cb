"""OFL1201 device-compute-on-host: device compute on a value that lives in host memory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.model import Diagnostic, Origin, Role, Step
from offload_fixer.rules import FixDoc, Rule, TargetBehaviour, at_host_op, on_branch, origin_phrase
from offload_fixer.rules.examples import example

if TYPE_CHECKING:
    from jaxlib.mlir import ir

    from offload_fixer.analysis.diagnose import Diagnoser
    from offload_fixer.analysis.offloader import Seed, WalkResult
    from offload_fixer.static.rules import StaticHostCompute

_INVALID = """
@jax.jit
def f(x):
    offloaded = jax.device_put(x, $HOST)
    y = jnp.sin(offloaded)  # runs on the host CPU, on data in host memory
    return jax.device_put(y, $DEVICE)


args = (jnp.ones(8),)
"""

_VALID = """
def sine(x):
    # x streams in from host memory; only its copy on device is computed on.
    return jnp.sin(jax.device_put(x, $DEVICE))


f = jax.jit(sine, in_shardings=$HOST_SHARDING)
args = (jax.ShapeDtypeStruct((8,), jnp.float32),)
"""


def from_walk(d: Diagnoser, seed: Seed, walk: WalkResult) -> Iterator[Diagnostic]:
    """The computations the seed reaches before a move to device, and the copies XLA makes of
    an updated host buffer that is both returned and read again."""
    if walk.host_compute.get(seed):
        yield _host_compute(d, seed, walk.host_compute[seed])
    for op in walk.host_copies.get(seed, ()):
        yield at_host_op(RULE, d, seed, op, msg.HOST_COMPUTE.format(name="copy"), _copy_explanation(d.op_name(op)))


def _host_compute(d: Diagnoser, seed: Seed, ops: list[ir.Operation]) -> Diagnostic:
    origin = d.origin(seed)
    first = ops[0]
    if d.host_compute_offload:
        message = msg.HOST_COMPUTE.format(name=d.op_name(first))
        severity = RULE.severity(d.target)
    else:
        message = msg.HOST_COMPUTE_DISABLED.format()
        severity = "error"
    return Diagnostic(
        code=RULE.code,
        severity=severity,
        target=d.target,
        message=message,
        explanation=_compute_explanation(origin, [d.op_name(op) for op in ops]),
        origin=origin,
        trace=tuple(Step(op.name, Role.HOST_COMPUTE, d.span(op)) for op in ops),
        span=d.span(first) or origin.span,
        fixes=(RULE.fix_option("device"),),
        function=d.function,
    )


def from_static_compute(site: StaticHostCompute) -> Iterator[Diagnostic]:
    """The source check's OFL1201: a host value's computations before any move back to device,
    at the first, worded as ``run`` words them."""
    if site.kind != "compute":
        return
    first, where = site.ops[0]
    explanation = _compute_explanation(site.origin, [op for op, _ in site.ops])
    if site.elsewhere:
        explanation += f" Also at: {', '.join(site.elsewhere[:6])}."
    if site.condition is not None:
        explanation = on_branch(*site.condition, explanation)
    yield Diagnostic(
        code=RULE.code,
        severity=RULE.severity(site.target),
        target=site.target,
        message=msg.HOST_COMPUTE.format(name=first),
        explanation=explanation,
        origin=site.origin,
        trace=(site.start, *(Step(op, Role.HOST_COMPUTE, span) for op, span in site.ops[:16])),
        span=where,
        fixes=(RULE.fix_option("device"),),
        function=site.function,
        source="static",
        source_sha256=site.source_sha256,
    )


def _compute_explanation(origin: Origin, ops: list[str]) -> str:
    names = ", ".join(dict.fromkeys(ops[:8]))
    return (
        f"{origin_phrase(origin)} is used by {len(ops)} computation(s) ({names}) before any move back "
        "to device. XLA runs them on the host CPU over host memory, which is usually far slower than "
        "intended; the usual cause is a missing move back to device where the value enters the computation."
    )


def _copy_explanation(update: str) -> str:
    return (
        f"The buffer {update} updates in host memory is both returned and read again. XLA gives "
        "the output its own copy of the buffer, and that copy of the whole buffer runs as host "
        "compute on every call. Read the buffer before the update, or return it without reading "
        "the updated value."
    )


RULE = Rule(
    code=codes.DEVICE_COMPUTE_ON_HOST,
    summary="Device compute on a value that lives in host memory",
    what_it_does=(
        "Reports arithmetic, reshapes, reductions and other compute whose operand is a "
        "value in host memory that has not been moved back to device."
    ),
    why_bad=(
        "XLA cannot run device kernels on host memory. It marks each such instruction as "
        "host compute, so it runs on the host CPU, usually far slower than on the "
        "accelerator, and the result stays in host memory. This is almost always a missing "
        "move back to device."
    ),
    targets={
        "tpu": TargetBehaviour(
            "warning",
            "XLA converts the instruction into host compute and logs a warning to libtpu's log "
            "files (tpu_logs), not to the program's output",
            msg.HOST_COMPUTE.placeholder(),
        ),
        "gpu": TargetBehaviour(
            "warning",
            "XLA logs a warning to stderr and converts the instruction into host compute",
            msg.HOST_COMPUTE.placeholder(),
        ),
    },
    fixes=(
        FixDoc(
            "device",
            "Move the operand back to device before the compute",
            "safe",
            "Values are unchanged and the compute runs on the accelerator; only where the operand lives changes.",
        ),
        FixDoc(
            None,
            'Mark the compute as intended host compute: `compute_on` with `compute_type="device_host"` '
            "(from JAX 0.11.1 only the function wrapper, `compute_on(f, compute_type=..., out_memory_spaces=...)`)",
            "display-only",
            "Only the author knows whether running this on the host CPU is intended.",
        ),
    ),
    applies_to="Every JAX version",
    invalid=(example(_INVALID),),
    valid=(example(_VALID),),
    from_walk=from_walk,
    from_static_compute=from_static_compute,
)
