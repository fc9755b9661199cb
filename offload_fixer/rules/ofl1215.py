"""OFL1215 mixed-memory-spaces: an operation whose array operands are in host and in device
memory, which JAX refuses from 0.7.1, before anything compiles. The source check finds it in
the source; ``run`` and the API in JAX's error (``offload_fixer.trace_refusals``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from offload_fixer import codes
from offload_fixer.jax_compat import Regime
from offload_fixer.model import Diagnostic, FunctionRef, Origin, Role, Span, Step
from offload_fixer.rules import FixDoc, Rule, ToolMessage, on_branch, origin_phrase, same_everywhere
from offload_fixer.rules.examples import example

if TYPE_CHECKING:
    from offload_fixer.static.rules import StaticHostCompute

JAX_REFUSES = ToolMessage(
    codes.MIXED_MEMORY_SPACES,
    "JAX refuses `{op}`: one operand is in host memory and another in device memory "
    "(ValueError: memory_space of all inputs passed to `{op}` must be the same)",
)
_JAX_TEXT = (
    "ValueError: memory_space of all inputs passed to `add` must be the same. Got one operand "
    "with type: float32<host>[1024] and another operand with type: float32[1024]"
)

_INVALID = """
moments = jax.device_put(jnp.zeros(1024), $HOST)  # optimizer moments kept in host memory
grads = jnp.ones(1024)
# A host operand and a device operand: JAX refuses to trace the add.
moments = 0.9 * moments + 0.1 * grads
"""

_INVALID_WHERE = """
buffer = jax.device_put(jnp.arange(8.0), $HOST)
# `jnp.where` makes the 0.0 a device array of `buffer`'s shape before it selects.
clipped = jnp.where(buffer > 0, buffer, 0.0)
"""

_VALID = """
moments = jax.device_put(jnp.zeros(1024), $HOST)  # optimizer moments kept in host memory
grads = jnp.ones(1024)
moments = jax.device_put(moments, $DEVICE)  # back to device memory for the update
moments = 0.9 * moments + 0.1 * grads
"""

_VALID_WHERE = """
buffer = jax.device_put(jnp.arange(8.0), $HOST)
on_device = jax.device_put(buffer, $DEVICE)
clipped = jnp.where(on_device > 0, on_device, 0.0)
"""

_WHY = (
    "From JAX 0.7.1 the memory space is part of an array's type (`float32<host>[1024]`), and "
    "an operation takes operands of one memory space only: JAX raises a ValueError when it "
    "traces one whose operands of one dimension or more are in host and in device memory, "
    "outside a jit as inside one. Scalars are not compared. Move the host operand to device "
    "first (or the device one to host, to compute there)."
)


def refused(primitive: str, at: Span | None, origin: Origin, function: FunctionRef | None, target: str) -> Diagnostic:
    """``run``'s and the API's OFL1215 from JAX's refusal of ``primitive``, which ``origin``
    reaches: a committed host argument (the fix moves it to device where the function starts),
    or a value the function moves to host at a place JAX's error does not give (no fix: the
    source check finds the move); ``at``: where the user's code asked for the operation."""
    argument = origin.kind == "host_argument"
    start = Step("argument", Role.HOST_ARGUMENT, origin.span) if argument else Step("device_put", Role.MOVE_TO_HOST)
    return Diagnostic(
        code=RULE.code,
        severity=RULE.severity(target),
        target=target,
        message=JAX_REFUSES.format(op=primitive),
        explanation=f"{origin_phrase(origin)} meets a value in device memory in `{primitive}`. {_WHY}",
        origin=origin,
        trace=(start, Step(primitive, Role.FAILURE, at)),
        span=at or origin.span,
        fixes=(RULE.fix_option("device"),) if argument else (),
        function=function,
    )


def from_static_compute(site: StaticHostCompute) -> Iterator[Diagnostic]:
    """The source check's OFL1215, at the operation JAX refuses."""
    if site.kind != "mixed":
        return
    op, where = site.ops[0]
    explanation = f"{origin_phrase(site.origin)} meets a value in device memory in `{op}`. {_WHY}"
    if site.condition is not None:
        explanation = on_branch(*site.condition, explanation)
    yield Diagnostic(
        code=RULE.code,
        severity=RULE.severity(site.target),
        target=site.target,
        message=JAX_REFUSES.format(op=op),
        explanation=explanation,
        origin=site.origin,
        trace=(site.start, Step(op, Role.HOST_COMPUTE, where)),
        span=where,
        fixes=(RULE.fix_option("device"),),
        function=site.function,
        source="static",
        source_sha256=site.source_sha256,
    )


RULE = Rule(
    code=codes.MIXED_MEMORY_SPACES,
    summary="An operation mixes operands in host memory and in device memory",
    what_it_does=(
        "Reports an operation (`+`, `jnp.where`, an index by an array, `lax.dynamic_update_slice`) "
        "whose array operands are in host memory and in device memory, in a jit or outside one."
    ),
    why_bad=_WHY,
    targets=same_everywhere(
        "error", "JAX raises a ValueError when it traces the operation, before anything compiles", _JAX_TEXT
    ),
    fixes=(
        FixDoc(
            "device",
            "Move the host operand to device before the operation",
            "safe",
            "A `jax.device_put` of the host operand to device memory before it meets the device "
            "operand; JAX then computes on device. `run --fix` writes it for a committed host "
            "argument JAX names, where the jitted function starts; for a value the program moves "
            "to host itself no edit is made: the move belongs where the program means its value "
            "to be on device.",
        ),
    ),
    applies_to="JAX 0.7.1 and later, where the memory space is part of an array's type; before, JAX "
    "compiles the operation, which computes on the host or returns host data through a device output",
    invalid=(example(_INVALID), example(_INVALID_WHERE)),
    valid=(example(_VALID), example(_VALID_WHERE)),
    applies=lambda sp: sp.regime is Regime.TYPED,
    judged_by_jax=True,
    from_static_compute=from_static_compute,
)
