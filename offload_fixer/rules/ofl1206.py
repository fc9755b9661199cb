"""OFL1206 host-slice-not-moved-to-device: a slice of a host value that is not moved to device."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.model import Diagnostic
from offload_fixer.rules import FixDoc, Rule, at_host_op, origin_phrase, same_everywhere
from offload_fixer.rules.examples import example

if TYPE_CHECKING:
    from offload_fixer.analysis.diagnose import Diagnoser
    from offload_fixer.analysis.offloader import Seed, WalkResult

_INVALID = """
def first_half(x):
    offloaded = jax.device_put(x, $HOST)
    return offloaded[:4]  # sliced in host memory, never moved back


f = jax.jit(first_half, out_shardings=$HOST_SHARDING)
args = (jnp.ones(8),)
"""

_VALID = """
@jax.jit
def f(x):
    offloaded = jax.device_put(x, $HOST)
    return jax.device_put(offloaded[:4], $DEVICE)  # only the slice is copied to device


args = (jnp.ones(8),)
"""


def from_walk(d: Diagnoser, seed: Seed, walk: WalkResult) -> Iterator[Diagnostic]:
    for op in walk.host_slices.get(seed, ()):
        explanation = (
            f"A slice of {origin_phrase(d.origin(seed)).lower()} is not followed by a move to device on every "
            "path, so XLA cannot turn it into a host-to-device copy and runs it on the host instead."
        )
        yield at_host_op(
            RULE, d, seed, op, msg.SLICE_ON_HOST.format(opcode=d.opcode(op), name=d.op_name(op)), explanation
        )


RULE = Rule(
    code=codes.HOST_SLICE_NOT_MOVED_TO_DEVICE,
    summary="A slice of a host value is not moved to device",
    what_it_does=(
        "Reports a slice or dynamic slice of a value in host memory whose result is not moved straight to device."
    ),
    why_bad=(
        "A slice that feeds only a move to device becomes a cheap copy of just that "
        "slice. Anything else makes XLA convert the slice into host compute, which runs "
        "on the host CPU."
    ),
    targets=same_everywhere(
        "warning", "XLA logs a warning and converts the slice into host compute", msg.SLICE_ON_HOST.placeholder()
    ),
    fixes=(
        FixDoc(
            "device",
            "Move the slice to device right after taking it",
            "safe",
            "Values are unchanged; only the slice is copied to device, which is what the "
            "compute after it needs anyway.",
        ),
    ),
    applies_to="Every JAX version",
    invalid=(example(_INVALID),),
    valid=(example(_VALID),),
    from_walk=from_walk,
)
