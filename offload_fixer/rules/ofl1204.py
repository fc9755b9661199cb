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
    from offload_fixer.analysis.backend import Backend
    from offload_fixer.analysis.diagnose import Diagnoser
    from offload_fixer.analysis.offloader import Failure, Seed, WalkResult
    from offload_fixer.static.rules import StaticSite

UNPINNED_PARAMETER = msg.XlaMessage(
    "tpu-unpinned-parameter",
    "Shape mismatch between parameter number {index} and its operand in {name}",
    codes.UNPINNED_HOST_MEMORY,
    status="INTERNAL",
    stable="Shape mismatch between parameter number {index} and its operand in",
)
"""libtpu: a fusion reading an ``unpinned_host`` (S(6)) parameter."""
DMA_HBM_TO_HBM = "Unimplemented DMA from hbm to hbm."
"""libtpu's text for a copy into an output buffer that lies in device memory (HBM) while the
output is declared elsewhere; two rules meet it (OFL1204, OFL1209), so XLA's text alone does
not say which."""
UNPINNED_OUTPUT = msg.XlaMessage(
    "tpu-unpinned-output",
    DMA_HBM_TO_HBM,
    codes.UNPINNED_HOST_MEMORY,
    status="FAILED_PRECONDITION",
)
"""libtpu (up to JAX 0.11's): an ``unpinned_host`` output computed in device memory."""

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
    UNPINNED_PARAMETER: backend_failure(
        UNPINNED_PARAMETER,
        "An 'unpinned_host' argument is computed on",
        (
            "On TPU 'unpinned_host' is memory space S(6), which the host offloader does not stream "
            "from; a fusion that reads such an argument gets a parameter shape that disagrees with "
            "its operand and libtpu fails with an internal error. Declare the argument 'pinned_host' "
            "and move it to device before computing on it."
        ),
    ),
    UNPINNED_OUTPUT: backend_failure(
        UNPINNED_OUTPUT,
        "An 'unpinned_host' output is computed in device memory",
        (
            "On TPU 'unpinned_host' is memory space S(6), and libtpu has no copy from device memory "
            "into it for an output. Declare the output 'pinned_host' (or 'device')."
        ),
    ),
}


def backend(b: Backend) -> Iterator[Failure]:
    """On TPU, whose ``unpinned_host`` is S(6): an ``unpinned_host`` parameter computed on (the
    ``unpinned_argument_computed`` probe), and on the libtpu generations that fail so, an
    ``unpinned_host`` output no host value reaches (``device_value_to_unpinned_output``).
    libtpu 0.0.17.1 lays them out as ``pinned_host`` (``tpu_unpinned_host_is_host_memory``:
    the analysis reads them so before the walk), and none is left here."""
    if b.target != "tpu":
        return
    for arg in b.args:
        if arg.memory_kind == UNPINNED_HOST:
            op = b.first_compute_user(arg.index)
            if op is not None:
                yield b.failure(None, op, UNPINNED_PARAMETER, parameter=arg.index)
    if not b.xla.tpu_unpinned_output_from_device_fails:
        return
    reached = b.reached_outputs()
    for output in b.results:
        if output.memory_kind == UNPINNED_HOST and output.index not in reached:
            yield b.failure(None, None, UNPINNED_OUTPUT, parameter=output.index)


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
            UNPINNED_OUTPUT.placeholder(),
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
    backend=backend,
    backend_stage="entry",
)
