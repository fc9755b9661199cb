"""OFL1211 offload-does-nothing: a value moved to host that the compiled program keeps nowhere
in host memory (the program compiles; the memory saving the move asked for is gone)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from offload_fixer import codes
from offload_fixer.findings import split_argument
from offload_fixer.jax_compat import Regime
from offload_fixer.model import (
    HOST_KINDS,
    PINNED_HOST,
    UNPINNED_HOST,
    Diagnostic,
    FixOption,
    Origin,
    RematPolicy,
    XlaVerdict,
)
from offload_fixer.rules import FixDoc, Rule, TargetBehaviour, ToolMessage
from offload_fixer.rules.examples import example
from offload_fixer.source.checkpoint_names import close_tags

if TYPE_CHECKING:
    from offload_fixer.analysis.diagnose import Diagnoser
    from offload_fixer.analysis.offloader import Seed, WalkResult

MOVED_BACK = ToolMessage(
    codes.OFFLOAD_DOES_NOTHING,
    "This move to host does nothing: the value is moved back to device to be returned as output "
    "{outputs}, declared device memory, so nothing stays in host memory.",
)
ROUND_TRIP = ToolMessage(
    codes.OFFLOAD_DOES_NOTHING,
    "XLA:GPU removes this move to host: the value is moved straight back to device, so it never occupies host memory.",
)

STATE_BACK_ON_DEVICE = ToolMessage(
    codes.OFFLOAD_DOES_NOTHING,
    "Host argument {argument} is moved to device, updated and returned as output {outputs} in "
    "device memory: after one step this state lives on device, and host memory holds none of it.",
)

POLICY_NEVER_DIFFERENTIATED = ToolMessage(
    codes.OFFLOAD_DOES_NOTHING,
    "This remat offload policy does nothing: the checkpointed function is never differentiated, "
    "and a policy only decides what a backward pass keeps.",
)
POLICY_NAMES_UNTAGGED = ToolMessage(
    codes.OFFLOAD_DOES_NOTHING,
    "This remat policy offloads {names}, which no `checkpoint_name` in the program tags{hint}: nothing is offloaded.",
)
RENAME_TITLE = ToolMessage(codes.OFFLOAD_DOES_NOTHING, "Offload {tag!r}, the name checkpoint_name tags")
RENAME_WHY = ToolMessage(
    codes.OFFLOAD_DOES_NOTHING,
    "Respell {name!r} as {tag!r} in the policy: the tagged value is then offloaded, as the policy "
    "was written to do. Values are unchanged; host memory holds the residual.",
)
POLICY_MATCHES_NOTHING = ToolMessage(
    codes.OFFLOAD_DOES_NOTHING,
    "The remat policy `{policy}` matches no operation of the checkpointed function{detail}: nothing is offloaded.",
)
POLICY_DESTINATION_NOT_HOST = ToolMessage(
    codes.OFFLOAD_DOES_NOTHING,
    "This remat policy offloads to `{destination}`, which is not host memory: nothing moves.",
)
PIN_DESTINATION_TITLE = ToolMessage(codes.OFFLOAD_DOES_NOTHING, "Offload to 'pinned_host', host memory")
PIN_DESTINATION_WHY = ToolMessage(
    codes.OFFLOAD_DOES_NOTHING,
    "Spell the policy's destination 'pinned_host': the residuals it matches are then offloaded, as "
    "the policy was written to do. Values are unchanged; host memory holds the residuals.",
)
PIN_DESTINATION = FixOption("host", PIN_DESTINATION_TITLE.format(), PIN_DESTINATION_WHY.format())
"""The remedy of a policy whose destination is device memory, in both engines."""
POLICY_NAMES_NOT_RESIDUALS = ToolMessage(
    codes.OFFLOAD_DOES_NOTHING,
    "The values this remat policy offloads ({names}) are never residuals: the checkpointed function "
    "returns them (a scan carry, its next step's input) or the backward pass does not read them, "
    "so nothing is offloaded.",
)
POLICY_OFFLOADS_NOTHING = ToolMessage(
    codes.OFFLOAD_DOES_NOTHING, "The remat policy `{policy}` offloads nothing in the traced program."
)

_INVALID = """
def adam_moments(mu, grad):
    mu = 0.9 * mu + 0.1 * grad
    # Meant to keep the moments in host memory between steps...
    return jax.device_put(mu, $HOST), jnp.sum(grad * grad)


# ...but out_shardings says device: JAX moves them back to device before returning them.
f = jax.jit(adam_moments, out_shardings=($DEVICE_SHARDING, $DEVICE_SHARDING))
args = (jnp.ones(8), jnp.ones(8))
"""

_INVALID_SCAN = """
def trajectory(xs):
    def step(total, x):
        return total + x, jax.device_put(x * 2, $HOST)  # each step's row to host

    return lax.scan(step, jnp.zeros(8), xs)


f = jax.jit(trajectory, out_shardings=($DEVICE_SHARDING, $DEVICE_SHARDING))
args = (jnp.ones((4, 8)),)
"""

_VALID = """
def adam_moments(mu, grad):
    mu = 0.9 * mu + 0.1 * grad
    return jax.device_put(mu, $HOST), jnp.sum(grad * grad)


# The moments' output is declared host memory: they stay there between steps.
f = jax.jit(adam_moments, out_shardings=($HOST_SHARDING, $DEVICE_SHARDING))
args = (jnp.ones(8), jnp.ones(8))
"""

_VALID_SCAN = """
def trajectory(xs):
    def step(total, x):
        return total + x, jax.device_put(x * 2, $HOST)

    return lax.scan(step, jnp.zeros(8), xs)


f = jax.jit(trajectory, out_shardings=($DEVICE_SHARDING, $HOST_SHARDING))
args = (jnp.ones((4, 8)),)
"""

_WHY_MOVED_BACK = (
    "Every path of the value from its move to host ends at a move back to device that is an "
    "output: JAX inserts that move for an output whose `out_shardings` leaf is device memory. "
    "The compiled program returns the output in device memory (host output bytes 0 in its "
    "memory analysis); libtpu even copies the value to host and straight back. Declare the "
    "output `pinned_host` to keep it on host, or drop the move."
)
_WHY_ROUND_TRIP = (
    "The value's only users are moves back to device, with nothing between them that XLA:GPU "
    "must keep apart, and XLA:GPU removes such a pair: the compiled program holds no host "
    "memory for it. Put `lax.optimization_barrier` between the move to host and the move back "
    "(as JAX's remat policies do) to keep the offload, or drop the move."
)


def from_walk(d: Diagnoser, seed: Seed, walk: WalkResult) -> Iterator[Diagnostic]:
    """A ``pinned_host`` move whose value only ever goes back to device: as device outputs
    (every target), or straight away (XLA:GPU removes the pair); a host argument's state that
    leaves on device (:func:`_state_back_on_device`). Otherwise a host argument moved to
    device is streamed in, never reported: it lives in host memory between calls."""
    if seed.kind == "host_argument":
        yield from _state_back_on_device(d, seed, walk)
        return
    moves = walk.device_moves.get(seed)
    if seed.kind != "move_to_host" or seed.memory_kind != PINNED_HOST or not moves:
        return
    kept = (walk.host_compute, walk.host_slices, walk.copied_slices, walk.host_copies)
    if any(seed in found for found in kept) or any(r.seed == seed for r in walk.reaches):
        return
    if any(failure.seed == seed for failure in walk.failures):
        return
    outputs = sorted({i for move in moves for i in walk.returned_moves.get(move, ())})
    moved_back = all(move in walk.returned_moves for move in moves)
    if not moved_back and not (d.target == "gpu" and seed in walk.round_trips):
        return
    origin = d.origin(seed)
    paths = [d.output_path(i) or "(result)" for i in outputs]
    yield Diagnostic(
        code=RULE.code,
        severity=RULE.severity(d.target),
        target=d.target,
        message=MOVED_BACK.format(outputs=", ".join(paths)) if moved_back else ROUND_TRIP.format(),
        explanation=_WHY_MOVED_BACK if moved_back else _WHY_ROUND_TRIP,
        output_index=outputs[0] if moved_back else None,
        output_path=paths[0] if moved_back else None,
        origin=origin,
        span=origin.span,
        fixes=(RULE.fix_option("host"), RULE.fix_option("device")) if moved_back else (RULE.fix_option("device"),),
        function=d.function,
        related_outputs=tuple(paths[1:]) if moved_back else (),
    )


_WHY_STATE = (
    "The argument arrives in host memory (restored or kept there on purpose, such as an "
    "optimizer state) and the step moves it to device to update it. The update, a value of the "
    "argument's own type under its own key in the returned tree, is returned in device memory: "
    "no `out_shardings` leaf declares it, so JAX gives it the memory kind of its type, device. "
    "The caller passes the returned state to the next step, so from the first step on it "
    "occupies device memory and the offload is gone (the compiled program's host output bytes "
    "hold none of it). Declare that output `pinned_host` in `out_shardings` to keep the state "
    "on host between steps."
)


def _state_back_on_device(d: Diagnoser, seed: Seed, walk: WalkResult) -> Iterator[Diagnostic]:
    """A ``pinned_host`` argument whose update the function returns in device memory, where JAX
    inferred that kind: the output of the argument's type reached from its move to device,
    under the argument's own keys in the returned tree (``opt_state['mu']`` returned at
    ``[1]['mu']``; a plain array argument has no key that ties it to one output). A device
    leaf the jit declares is what the author asked for, and the tool's own device fix
    declares a returned state host, so neither is reported. Nor is an eager operation's
    (``device_put(x, Space.Device)`` of a host array outside any jit): JAX's own jit, whose
    ``args[0]`` is no state of the user's."""
    if seed.memory_kind != PINNED_HOST or (d.function is not None and d.function.eager):
        return
    origin = d.origin(seed)
    keys = split_argument(origin.argument or "")[1]
    if not keys:
        return
    outputs = [i for i in d.updates_returned_on_device(seed, walk) if d.output_path(i).endswith(keys)]
    if not outputs:
        return
    paths = [d.output_path(i) for i in outputs]
    yield Diagnostic(
        code=RULE.code,
        severity=RULE.severity(d.target),
        target=d.target,
        message=STATE_BACK_ON_DEVICE.format(argument=origin.argument, outputs=", ".join(paths)),
        explanation=_WHY_STATE,
        output_index=outputs[0],
        output_path=paths[0],
        origin=origin,
        span=origin.span,
        fixes=(RULE.fix_option("host"),),
        function=d.function,
        related_outputs=tuple(paths[1:]),
    )


WHY_POLICY = (
    "A remat policy offloads the residuals it matches: values the backward pass needs, moved to "
    "host memory in the forward pass and back for the backward. A policy that matches nothing "
    "(a name no `checkpoint_name` tags, a rule no operation fits), sends its matches to device "
    "memory, matches only values the checkpointed function returns (a scan's carry is its next "
    "step's input, never a residual) or is applied where nothing is differentiated leaves no "
    "move in the program: the residuals stay in device memory, and the compiled program holds "
    "0 bytes of host memory for them."
)
_NO_BATCH_DIMS = "offload_dot_with_no_batch_dims"


def from_policy(d: Diagnoser, policy: RematPolicy) -> Iterator[Diagnostic]:
    """A remat offload policy through which the traced program offloads nothing, and why. A
    policy whose destination is ``unpinned_host`` is OFL1204's."""
    if policy.offloads or policy.destination == UNPINNED_HOST:
        return
    fixes: tuple[FixOption, ...] = ()
    tagged = [name for name in policy.offload_names or () if name in policy.tagged_names]
    if policy.host_inputs and policy.differentiated and (tagged or policy.matched_to_host or not policy.tagged_names):
        return  # its residuals may arrive as host arguments, tagged by another program (a vjp's backward)
    untagged = policy.offload_names is not None and not tagged
    if not policy.differentiated:
        message = POLICY_NEVER_DIFFERENTIATED.format()
    elif policy.destination is not None and policy.destination not in HOST_KINDS:
        message = POLICY_DESTINATION_NOT_HOST.format(destination=policy.destination)
        fixes = (PIN_DESTINATION,)
    elif untagged:
        close = [match for name in policy.offload_names or () for match in close_tags(name, policy.tagged_names)[:1]]
        hint = f" (did you mean {', '.join(repr(name) for name in dict.fromkeys(close))}?)" if close else ""
        names = ", ".join(repr(name) for name in policy.offload_names or ()) or "no name"
        message = POLICY_NAMES_UNTAGGED.format(names=names, hint=hint)
    elif policy.host_moves:
        return  # the program moves values to host: which of them are this policy's, the jaxpr does not always show
    elif tagged:
        message = POLICY_NAMES_NOT_RESIDUALS.format(names=", ".join(repr(name) for name in tagged))
    elif policy.matched == 0:
        detail = " (every dot in it has batch dimensions)" if policy.policy == _NO_BATCH_DIMS else ""
        message = POLICY_MATCHES_NOTHING.format(policy=policy.policy, detail=detail)
    elif policy.matched_to_host == 0:
        message = POLICY_DESTINATION_NOT_HOST.format(destination=policy.destination or "device")
    else:
        message = POLICY_OFFLOADS_NOTHING.format(policy=policy.policy)
    origin = Origin(
        "offload_policy",
        policy.destination or PINNED_HOST,
        policy.span,
        detail=policy.policy,
        key=f"policy:{policy.span}",
    )
    yield Diagnostic(
        code=RULE.code,
        severity=RULE.severity(d.target),
        target=d.target,
        message=message,
        explanation=WHY_POLICY,
        origin=origin,
        span=policy.span,
        fixes=fixes,
        function=d.function,
    )


def compiled_evidence(verdict: XlaVerdict, diagnostic: Diagnostic) -> str | None:
    """What the compiled program shows of the finding (its memory analysis), or ``None``
    where it keeps the value in host memory after all."""
    memory = verdict.memory
    if verdict.outcome != "compiled" or memory is None:
        return None
    index = diagnostic.output_index
    if index is None:  # a round trip: nothing at all may be left in host memory
        return None if memory.host_total else "compiled with 0 bytes of host memory"
    kinds = verdict.output_memory_kinds
    if index < len(kinds) and kinds[index] == PINNED_HOST:
        return None
    if memory.host_output and not kinds:
        return None
    return (
        f"returns output {diagnostic.output_path or index} in device memory (host output bytes "
        f"{memory.host_output}, host temporaries {memory.host_temp})"
    )


RULE = Rule(
    code=codes.OFFLOAD_DOES_NOTHING,
    summary="A move to host that the compiled program keeps nowhere in host memory",
    what_it_does=(
        'Reports a move to `"pinned_host"` whose value never stays in host memory: every path '
        "from it ends at a move back to device that is an output (an `out_shardings` leaf "
        "that says device makes JAX insert that move), or, on GPU, its only users are moves "
        "back to device, which XLA:GPU removes. A host argument moved to device inside the "
        "function is streaming (it lives on host between calls) and is not reported, unless its "
        "update is returned under its own keys in device memory that no `out_shardings` leaf "
        "declares: a state (an optimizer's moments restored to host memory) that after one step "
        "lives on device. From the "
        "traced program (`run` and the Python API), it also reports a remat offload policy "
        "that offloads nothing: names no `checkpoint_name` tags (with the nearest tag), a rule "
        "that matches no operation (`offload_dot_with_no_batch_dims` over batched einsums), a "
        "destination that is device memory, matches that are all returned values (a scan "
        "carry), or a checkpoint never differentiated."
    ),
    why_bad=(
        "The program compiles and runs, but the memory the move was meant to free is not "
        "freed: the compiled program's memory analysis shows 0 host output bytes where the "
        "move asked for host memory, and the value costs device memory as before (plus, on "
        "TPU, a copy to host and back). Optimizer state 'offloaded' this way is the common "
        "case: the moments are moved to host inside the step, but the step's `out_shardings` "
        "says device."
    ),
    targets={
        "tpu": TargetBehaviour(
            "warning",
            "compiles; libtpu copies the value to host and straight back (a host temporary) and "
            "returns the output in device memory (0 host output bytes)",
            None,
        ),
        "gpu": TargetBehaviour(
            "warning",
            "compiles; the output is returned in device memory (0 host output bytes), and a move "
            "to host that a move to device directly follows is removed (0 host bytes)",
            None,
        ),
    },
    fixes=(
        FixDoc(
            "host",
            'Declare the output host memory (an `out_shardings` leaf with memory_kind="pinned_host")',
            "display-only",
            "The value then stays in host memory between calls, as the move asked; the caller "
            "gets a host array back, which it passes to the next call as a host argument.",
        ),
        FixDoc(
            "device",
            "Drop the move to host, or keep it apart from the move back with `lax.optimization_barrier`",
            "display-only",
            "Values are unchanged. The move saves nothing where it is; whether the value should "
            "live on host (and where it is next read) only the author knows.",
        ),
    ),
    applies_to=(
        "JAX >= 0.7.1, where an output's memory kind follows `out_shardings` and JAX moves a host "
        "value back to device for a device leaf (older JAX stops such a tuple output with error 1200)"
    ),
    invalid=(example(_INVALID), example(_INVALID_SCAN)),
    valid=(example(_VALID), example(_VALID_SCAN)),
    applies=lambda sp: sp.regime is Regime.TYPED,
    from_walk=from_walk,
    from_policy=from_policy,
    compiled_evidence=compiled_evidence,
    static_scope=(
        "a name a `save_and_offload_only_these_names` policy offloads that no `checkpoint_name` of the "
        'file tags but one nearly spells ("hiden" for "hidden"), which `--fix` respells'
    ),
)
