"""OFL1204 unpinned-host-memory: "unpinned_host" is typed as device memory by JAX but moved to
host by XLA (and on TPU is not the host memory the host offloader streams)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.jax_compat import Regime
from offload_fixer.model import UNPINNED_HOST, Diagnostic
from offload_fixer.rules import FixDoc, Rule, TargetBehaviour, ToolMessage
from offload_fixer.rules.examples import example
from offload_fixer.rules.ofl1207 import backend_failure

if TYPE_CHECKING:
    from offload_fixer.analysis.diagnose import Diagnoser
    from offload_fixer.analysis.offloader import Seed, WalkResult
    from offload_fixer.static.rules import StaticSite

UNPINNED_MOVE = ToolMessage(
    codes.UNPINNED_HOST_MEMORY,
    "Value moved to 'unpinned_host': JAX types it as device memory while XLA moves it to host.",
)
UNPINNED_POLICY = ToolMessage(
    codes.UNPINNED_HOST_MEMORY,
    "Offload destination 'unpinned_host' offloads nothing: JAX treats it as device memory.",
)
PIN_HOST_MEMORY = ToolMessage(codes.UNPINNED_HOST_MEMORY, "Replace 'unpinned_host' with 'pinned_host'.")
"""How the OFL1204 fix edits the source."""

_INVALID = """
@jax.jit
def f(x):
    # JAX types "unpinned_host" as device memory; XLA still moves the value to host.
    return jax.device_put(x * 2, $UNPINNED)


args = (jnp.ones(8),)
"""

_VALID = """
@jax.jit
def f(x):
    return jax.device_put(x * 2, $HOST)


args = (jnp.ones(8),)
"""


def from_walk(d: Diagnoser, seed: Seed, walk: WalkResult) -> Iterator[Diagnostic]:
    """A move to ``unpinned_host`` the lowered module carries."""
    if seed.memory_kind == UNPINNED_HOST and seed.op is not None:
        origin = d.origin(seed)
        yield Diagnostic(
            code=RULE.code,
            severity="warning",
            target=d.target,
            message=UNPINNED_MOVE.format(),
            explanation=RULE.why_bad,
            origin=origin,
            span=origin.span,
            fixes=(RULE.fix_option("host"),),
            function=d.function,
        )


def from_static(site: StaticSite) -> Iterator[Diagnostic]:
    """One OFL1204 per move to ``unpinned_host`` that reaches an output, where JAX and XLA
    disagree on it (``unpinned_host`` named host memory before 0.4.25)."""
    host = site.finding.leaf.origin
    trap = host.kind == "move_to_host" and host.memory_kind == UNPINNED_HOST
    if not trap or site.spelling.host_kind == UNPINNED_HOST or not site.first(RULE.code):
        return
    yield Diagnostic(
        code=RULE.code,
        severity="warning",
        target=site.target,
        message=UNPINNED_MOVE.format(),
        explanation=RULE.why_bad,
        origin=site.origin,
        span=site.origin.span,
        fixes=(RULE.fix_option("host", PIN_HOST_MEMORY.format()),),
        function=site.function,
        source="static",
        source_sha256=site.source_sha256,
    )


_FAILURE_TEXTS = {
    msg.UNPINNED_PARAMETER: backend_failure(
        msg.UNPINNED_PARAMETER,
        "An 'unpinned_host' argument is computed on",
        (
            "On TPU 'unpinned_host' is memory space S(6), which the host offloader does not stream "
            "from; a fusion that reads such an argument gets a parameter shape that disagrees with "
            "its operand and libtpu fails with an internal error. Declare the argument 'pinned_host' "
            "and move it to device before computing on it."
        ),
    ),
    msg.UNPINNED_OUTPUT: backend_failure(
        msg.UNPINNED_OUTPUT,
        "An 'unpinned_host' output is computed in device memory",
        (
            "On TPU 'unpinned_host' is memory space S(6), and libtpu has no copy from device memory "
            "into it for an output. Declare the output 'pinned_host' (or 'device')."
        ),
    ),
}


RULE = Rule(
    code=codes.UNPINNED_HOST_MEMORY,
    summary='"unpinned_host" is typed as device memory by JAX but moved to host by XLA',
    what_it_does=(
        'Reports moves to `"unpinned_host"`, offload policies with `offload_dst="unpinned_host"`, '
        "and, on TPU, `unpinned_host` arguments that are computed on and `unpinned_host` "
        "outputs computed in device memory."
    ),
    why_bad=(
        "JAX treats `unpinned_host` as device memory when it decides output memory kinds, "
        "while XLA treats the annotation as a move to host: a returned value reaches a "
        "device output (error 1200, unless it is the whole single output, which XLA "
        "repairs), and a remat policy that offloads to `unpinned_host` silently offloads nothing. On TPU `unpinned_host` is memory space S(6), not the "
        "host memory (S(5)) XLA's host offloader streams from and to: libtpu cannot compile "
        "compute on such an argument, nor a device value returned into such an output."
    ),
    targets={
        "tpu": TargetBehaviour(
            "error",
            "a move to `unpinned_host` is a move to host (error 1200 when the value reaches a "
            "device output); an `unpinned_host` argument that is computed on, or an "
            "`unpinned_host` output computed in device memory, fails to compile (memory space "
            "S(6) is not the host memory XLA offloads to)",
            msg.UNPINNED_OUTPUT.placeholder(),
        ),
        "gpu": TargetBehaviour(
            "warning",
            "a move to `unpinned_host` is a move to host (error 1200 when the value reaches a "
            "device output); `unpinned_host` arguments and outputs compile as pinned host memory",
            None,
        ),
    },
    fixes=(
        FixDoc(
            "host",
            'Use "pinned_host"',
            "safe",
            "It states the same intent (host memory) in the kind JAX types as host memory, "
            "so JAX and XLA agree; values are unchanged.",
        ),
    ),
    applies_to=(
        'JAX 0.4.25 - 0.4.28 and >= 0.7.1 (0.4.29 - 0.7.0 propagate "unpinned_host" to '
        'outputs; before 0.4.25 "unpinned_host" was the name of host memory)'
    ),
    invalid=(example(_INVALID),),
    valid=(example(_VALID),),
    applies=lambda sp: sp.regime is not Regime.PROPAGATION and sp.host_kind != UNPINNED_HOST,
    from_walk=from_walk,
    from_static=from_static,
    failure_texts=_FAILURE_TEXTS,
    failure_fix="host",
)
