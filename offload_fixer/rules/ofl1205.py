"""OFL1205 host-value-in-while-condition: a while loop's condition is computed from a value in
host memory."""

from __future__ import annotations

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.rules import FixDoc, Rule, ToolMessage, same_everywhere
from offload_fixer.rules.examples import example

COMPILER_ABORTS = ToolMessage(codes.HOST_VALUE_IN_WHILE_CONDITION, "XLA aborts: {xla}")
"""XLA's failed check, which ends the compiling process rather than raising an error."""

_INVALID = """
@jax.jit
def f(rows):
    history = jax.device_put(jnp.zeros_like(rows), $HOST)

    def keep_going(state):
        i, history = state
        return (i < rows.shape[0]) & (jnp.sum(history) < 1e6)  # reads the offloaded buffer

    def write_row(state):
        i, history = state
        row = jax.device_put(rows[i] * 2, $HOST)
        return i + 1, lax.dynamic_update_slice(history, row[None], (i, 0))

    return lax.while_loop(keep_going, write_row, (0, history))[1]


args = (jnp.ones((4, 8)),)
"""

_VALID = """
@jax.jit
def f(rows):
    history = jax.device_put(jnp.zeros_like(rows), $HOST)

    def keep_going(state):
        i, total, history = state
        return (i < rows.shape[0]) & (total < 1e6)  # the running total stays on device

    def write_row(state):
        i, total, history = state
        row = rows[i] * 2
        written = lax.dynamic_update_slice(history, jax.device_put(row, $HOST)[None], (i, 0))
        return i + 1, total + jnp.sum(row), written

    return lax.while_loop(keep_going, write_row, (0, 0.0, history))[2]


args = (jnp.ones((4, 8)),)
"""


def _condition_compute(subject: str | None, target: str) -> tuple[str, str]:
    return msg.WHILE_CONDITION_COMPUTE.format(name=subject), (
        "A host buffer carried by a while loop is computed on in the loop's condition; XLA "
        "only allows moving host data around there."
    )


def _condition_root(subject: str | None, target: str) -> tuple[str, str]:
    return COMPILER_ABORTS.format(xla=msg.WHILE_CONDITION_ROOT.format()), (
        "A value in host memory decides a while loop's condition. The released compilers' "
        "host offloader fails a CHECK when its walk reaches the condition's result, and the "
        "compiling process aborts with no error to catch. Keep what the condition reads on "
        "device (a running count or total carried beside the host buffer)."
    )


RULE = Rule(
    code=codes.HOST_VALUE_IN_WHILE_CONDITION,
    summary="A while loop's condition is computed from a value in host memory",
    what_it_does=(
        "Reports a loop whose condition reads a value that lives in host memory -- a "
        "carried buffer that streams to host, a host argument -- and computes the loop's "
        "predicate from it."
    ),
    why_bad=(
        "The released compilers' host offloader follows host values into the loop "
        "condition, and when the walk reaches the condition's result the compilers of JAX "
        "up to 0.11 fail a CHECK: the compiling process aborts, with no exception and no "
        "error message for the program to catch; those of JAX 0.12 reject the program, "
        "naming the instruction that computes on the host value. (XLA's sources also reject compute on such a buffer in the condition "
        "while they allocate it in host memory.)"
    ),
    targets=same_everywhere(
        "error",
        "the compilers of JAX up to 0.11 abort on a failed check (no error to catch); from JAX 0.12 "
        "(libtpu 0.0.50.1, jax-cuda12-plugin 0.12.0.1) compilation fails with an error naming the "
        "condition's instruction",
        msg.WHILE_CONDITION_ROOT.placeholder(),
    ),
    fixes=(
        FixDoc(
            "device",
            "Decide the loop condition from a value kept on device",
            "display-only",
            "The condition has to be rewritten in terms of other state; only the author knows which.",
        ),
    ),
    applies_to="Every JAX version",
    invalid=(example(_INVALID),),
    valid=(example(_VALID),),
    failure_texts={msg.WHILE_CONDITION_COMPUTE: _condition_compute, msg.WHILE_CONDITION_ROOT: _condition_root},
)
