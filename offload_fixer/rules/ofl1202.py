"""OFL1202 host-update-into-device-buffer: a value moved to host is written into a buffer XLA
cannot place in host memory."""

from __future__ import annotations

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.rules import FixDoc, Rule, same_everywhere
from offload_fixer.rules.examples import example

_INVALID = """
@jax.jit
def f(history, row):
    offloaded = jax.device_put(history, $HOST)
    # XLA turns this update into a dynamic-update-slice of `history`, a device argument.
    return offloaded.at[0].set(row), row


args = (jnp.zeros((4, 8)), jnp.ones(8))
"""

_VALID = """
@jax.jit
def f(row):
    # A fresh buffer: XLA allocates it in host memory in place of the broadcast.
    offloaded = jax.device_put(jnp.zeros((4, 8)), $HOST)
    return offloaded.at[0].set(row), row


args = (jnp.ones(8),)
"""


def _device_parameter(subject: str | None, target: str) -> tuple[str, str]:
    return msg.DUS_DEVICE_PARAMETER.format(name=subject, index=""), (
        "A value moved to host is written into a buffer in place (a dynamic-update-slice, or "
        "a scatter XLA turns into one) whose buffer is an argument in device memory. XLA can "
        "only stream such updates into a buffer it allocates in host memory itself, from a "
        "broadcast such as jnp.zeros, or into a host argument; it rejects the module."
    )


def _not_broadcast(subject: str | None, target: str) -> tuple[str, str]:
    return msg.DUS_NOT_BROADCAST.format(name=subject), (
        "A value moved to host is written into a buffer with dynamic-update-slice (scan "
        "streaming), but that buffer does not come from a broadcast (e.g. jnp.zeros) XLA "
        "could allocate in host memory; XLA rejects the module."
    )


RULE = Rule(
    code=codes.HOST_UPDATE_INTO_DEVICE_BUFFER,
    summary="A value moved to host is written into a buffer XLA cannot place in host memory",
    what_it_does=(
        "Reports a dynamic-update-slice whose update was moved to host (the pattern `scan` "
        "uses to stream its stacked outputs to host memory), or a `.at[i].set(...)` scatter "
        "XLA rewrites into one, when the buffer it writes into is an argument in device "
        "memory or does not trace back to a broadcast such as `jnp.zeros`."
    ),
    why_bad=(
        "XLA streams such updates by allocating the whole buffer in host memory in place "
        "of the broadcast that created it, or by writing into an argument that is in host "
        "memory already. A device argument, or a buffer computed on device, has neither, "
        "and compilation fails."
    ),
    targets=same_everywhere("error", "compilation fails", msg.DUS_DEVICE_PARAMETER.placeholder()),
    fixes=(
        FixDoc(
            "device",
            "Build the streamed output with `lax.scan`'s stacked outputs, start from a fresh "
            "`jnp.zeros` buffer, or pass the buffer in host memory (`in_shardings`)",
            "display-only",
            "Replacing the buffer changes what the untouched rows contain; the author has "
            "to decide where existing contents come from.",
        ),
    ),
    applies_to="Every JAX version (JAX >= 0.7.1 refuses to update a device buffer with a host value at trace time; a move of the whole buffer still gets here)",
    invalid=(example(_INVALID),),
    valid=(example(_VALID),),
    failure_texts={msg.DUS_DEVICE_PARAMETER: _device_parameter, msg.DUS_NOT_BROADCAST: _not_broadcast},
)
