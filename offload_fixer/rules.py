"""One :class:`Rule` per diagnostic code: what it finds, why XLA objects, how to fix it.

The CLI's ``rules`` page, SARIF's ``driver.rules[]`` and the language server's hover text all
read from here, so the explanation a user sees is the same everywhere. Each rule carries an
invalid and a valid example (Fixit style), the programs of :mod:`offload_fixer.rule_examples`.
The tool's own message templates sit here too, beside the rules they word; XLA's own texts
are :mod:`offload_fixer.xla_messages`'s and each code's constant is :mod:`offload_fixer.codes`'.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from offload_fixer import codes
from offload_fixer import rule_examples as examples
from offload_fixer import xla_messages as msg
from offload_fixer.jax_compat import Regime, Spelling, spelling
from offload_fixer.model import TARGETS, UNPINNED_HOST, Safety, Severity


@dataclass(frozen=True)
class TargetBehaviour:
    """What XLA does on one target when the rule's pattern reaches it."""

    severity: Severity
    outcome: str
    message: str | None
    """XLA's message, with ``NAME``, ``N`` and ``OPCODE`` standing for an instruction's name,
    a count and an opcode; ``None`` when XLA says nothing."""


@dataclass(frozen=True)
class FixDoc:
    """A remedy as the rules page documents it; the planner decides per diagnostic."""

    title: str
    safety: Safety
    why: str


@dataclass(frozen=True)
class Rule:
    code: str
    """One of :mod:`offload_fixer.codes`'s constants."""
    summary: str
    what_it_does: str
    why_bad: str
    targets: Mapping[str, TargetBehaviour]
    fixes: tuple[FixDoc, ...]
    applies_to: str
    """Which JAX versions can produce the pattern, in words."""
    invalid: examples.Example
    valid: examples.Example
    references: tuple[str, ...] = ()
    applies: Callable[[Spelling], bool] = lambda sp: True
    """Whether a JAX version (its spelling) can produce the pattern: where it cannot, the
    invalid example is a program that version accepts, and the examples' tests say so."""

    @property
    def name(self) -> str:
        return codes.NAMES[self.code]

    @property
    def checked_statically(self) -> bool:
        """Whether ``offload-fixer check`` reports this code from source (``run`` reports all)."""
        return self.code in codes.STATIC_CODES

    def severity(self, target: str) -> Severity:
        return self.targets[target].severity

    def invalid_example(self, jax_version: str | None = None) -> str:
        return self.invalid(spelling(jax_version))

    def valid_example(self, jax_version: str | None = None) -> str:
        return self.valid(spelling(jax_version))


class UnknownRule(KeyError):
    """A code or rule name that no rule has."""

    def __str__(self) -> str:
        return str(self.args[0])


# ---------------------------------------------------------------------------------------
# The tool's own message templates, by code (mypy's ``message_registry``): what a diagnostic
# says where XLA prints nothing yet (the source check) or nothing at all. XLA's own texts are
# :mod:`offload_fixer.xla_messages`'s.
@dataclass(frozen=True)
class ToolMessage:
    code: str
    template: str
    """``str.format`` template."""

    def format(self, **fields: object) -> str:
        return self.template.format(**fields)


HOST_OUTPUT_IN_SOURCE = ToolMessage(
    codes.HOST_VALUE_DEVICE_OUTPUT,
    "Output {output} of `{function}` receives a value in {memory_kind} memory but is declared device memory "
    "(XLA error 1200)",
)
"""OFL1200 from the source check, which has no XLA instruction names to quote."""
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
COMPILER_ABORTS = ToolMessage(codes.HOST_VALUE_IN_WHILE_CONDITION, "XLA aborts: {xla}")
"""XLA's failed check, which ends the compiling process rather than raising an error."""
COMPILER_FAILS = ToolMessage(codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE, "XLA fails: {xla}")
BACKEND_FAILS = ToolMessage(
    codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE, "{summary}{subject}: the {compiler} compiler fails ({status}: {xla})"
)
"""What a backend cannot build (``summary``), quoting the message the compiler fails with."""

_MSG_1200 = msg.OUTPUT_NOT_HOST.placeholder()
_MSG_1201 = msg.HOST_COMPUTE.placeholder()
_MSG_1202 = msg.DUS_DEVICE_PARAMETER.placeholder()
_MSG_1205 = msg.WHILE_CONDITION_ROOT.placeholder()
_MSG_1206 = msg.SLICE_ON_HOST.placeholder()


def _same_everywhere(severity: Severity, outcome: str, message: str | None) -> dict[str, TargetBehaviour]:
    return {target: TargetBehaviour(severity, outcome, message) for target in TARGETS}


_RULES: tuple[Rule, ...] = (
    Rule(
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
        targets=_same_everywhere("error", "compilation fails (error 1200)", _MSG_1200),
        fixes=(
            FixDoc(
                "Move the value back to device before it is returned",
                "safe",
                "The output keeps the memory kind its callers already receive and the values "
                "are unchanged; the copy back to device is what XLA would need anyway. For an "
                "argument streamed from host (`in_shardings`) the move is written where the "
                "function starts, so the compute on it runs on device too; JAX keeps that move "
                "even where it types the argument as device memory (>= 0.7.1, traced from shapes).",
            ),
            FixDoc(
                "Declare the output as host memory in `out_shardings`",
                "unsafe",
                "Callers then receive that output in host memory: code that computes on it "
                "outside the jitted function becomes slow or needs its own move to device. An "
                "explicit `out_shardings` also has to name a sharding for every output leaf.",
            ),
            FixDoc(
                "Pass committed arrays, or give every output an explicit memory kind, when "
                "compiling ahead of time with a host `in_shardings`",
                "display-only",
                "Which arguments should live in host memory is a design decision the tool "
                "cannot infer from the function alone.",
            ),
        ),
        applies_to="Every JAX version; which programs trigger it differs by version (see above)",
        invalid=examples.OFL1200_INVALID,
        valid=examples.OFL1200_VALID,
        references=(
            "https://openxla.org/xla/errors/error_1200",
            "https://github.com/openxla/xla/pull/40519",
        ),
    ),
    Rule(
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
                _MSG_1201,
            ),
            "gpu": TargetBehaviour(
                "warning", "XLA logs a warning to stderr and converts the instruction into host compute", _MSG_1201
            ),
        },
        fixes=(
            FixDoc(
                "Move the operand back to device before the compute",
                "safe",
                "Values are unchanged and the compute runs on the accelerator; only where the operand lives changes.",
            ),
            FixDoc(
                'Mark the compute as intended host compute: `compute_on` with `compute_type="device_host"`',
                "display-only",
                "Only the author knows whether running this on the host CPU is intended.",
            ),
        ),
        applies_to="Every JAX version",
        invalid=examples.OFL1201_INVALID,
        valid=examples.OFL1201_VALID,
    ),
    Rule(
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
        targets=_same_everywhere("error", "compilation fails", _MSG_1202),
        fixes=(
            FixDoc(
                "Build the streamed output with `lax.scan`'s stacked outputs, start from a fresh "
                "`jnp.zeros` buffer, or pass the buffer in host memory (`in_shardings`)",
                "display-only",
                "Replacing the buffer changes what the untouched rows contain; the author has "
                "to decide where existing contents come from.",
            ),
        ),
        applies_to="Every JAX version (JAX >= 0.7.1 refuses to update a device buffer with a host value at trace time; a move of the whole buffer still gets here)",
        invalid=examples.OFL1202_INVALID,
        valid=examples.OFL1202_VALID,
    ),
    Rule(
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
        invalid=examples.OFL1204_INVALID,
        valid=examples.OFL1204_VALID,
        applies=lambda sp: sp.regime is not Regime.PROPAGATION and sp.host_kind != UNPINNED_HOST,
    ),
    Rule(
        code=codes.HOST_VALUE_IN_WHILE_CONDITION,
        summary="A while loop's condition is computed from a value in host memory",
        what_it_does=(
            "Reports a loop whose condition reads a value that lives in host memory -- a "
            "carried buffer that streams to host, a host argument -- and computes the loop's "
            "predicate from it."
        ),
        why_bad=(
            "The released compilers' host offloader follows host values into the loop "
            "condition, and when the walk reaches the condition's result it fails a CHECK: the "
            "compiling process aborts, with no exception and no error message for the program "
            "to catch. (XLA's sources also reject compute on such a buffer in the condition "
            "while they allocate it in host memory.)"
        ),
        targets=_same_everywhere("error", "the compiler aborts on a failed check (no error to catch)", _MSG_1205),
        fixes=(
            FixDoc(
                "Decide the loop condition from a value kept on device",
                "display-only",
                "The condition has to be rewritten in terms of other state; only the author knows which.",
            ),
        ),
        applies_to="Every JAX version",
        invalid=examples.OFL1205_INVALID,
        valid=examples.OFL1205_VALID,
    ),
    Rule(
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
        targets=_same_everywhere("warning", "XLA logs a warning and converts the slice into host compute", _MSG_1206),
        fixes=(
            FixDoc(
                "Move the slice to device right after taking it",
                "safe",
                "Values are unchanged; only the slice is copied to device, which is what the "
                "compute after it needs anyway.",
            ),
        ),
        applies_to="Every JAX version",
        invalid=examples.OFL1206_INVALID,
        valid=examples.OFL1206_VALID,
    ),
    Rule(
        code=codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE,
        summary="Host compute the released compiler's backend cannot compile",
        what_it_does=(
            "Reports device compute on host data that the target's released compiler accepts "
            "in its host offloader but cannot build afterwards: on GPU a dot (or a scatter with "
            "a dynamic index or an accumulating update); on TPU a dot in a loop body with an "
            "operand in device memory, a gather, or a scatter of several updates. Also a "
            "placement annotation that changes its operand's shape."
        ),
        why_bad=(
            "XLA turns device compute on a host value into host compute, but each backend "
            "builds only some host compute: the rest fails with an internal error or aborts the "
            "compiling process. These cases were measured on the released compilers "
            "(libtpu, jax-cuda12-plugin)."
        ),
        targets={
            "tpu": TargetBehaviour("error", "compilation fails with an internal error, or the compiler aborts", None),
            "gpu": TargetBehaviour("error", "compilation fails with an internal error", None),
        },
        fixes=(
            FixDoc(
                "Move the operand back to device before the compute",
                "safe",
                "Values are unchanged and the compute runs on the accelerator; only where the operand lives changes.",
            ),
        ),
        applies_to="Every JAX version with a released TPU or GPU compiler",
        invalid=examples.OFL1207_INVALID,
        valid=examples.OFL1207_VALID,
    ),
)

_BY_CODE = {rule.code: rule for rule in _RULES}
_BY_NAME = {rule.name: rule for rule in _RULES}


def all_rules() -> tuple[Rule, ...]:
    """Every rule in code order (the order SARIF's ``rules[]`` indexes)."""
    return _RULES


def get_rule(code_or_name: str) -> Rule:
    """Look a rule up by code (``OFL1200``, any case) or by name (``host-value-device-output``)."""
    key = code_or_name.strip()
    rule = _BY_CODE.get(key.upper()) or _BY_NAME.get(key.lower())
    if rule is None:
        close = difflib.get_close_matches(key, [*_BY_CODE, *_BY_NAME], n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known codes: {', '.join(_BY_CODE)}"
        raise UnknownRule(f"no rule {code_or_name!r}{hint}")
    return rule


def render_rule(code: str, jax_version: str | None = None) -> str:
    """The text page ``offload-fixer rules CODE`` prints (markdown that reads as plain text)."""
    rule = get_rule(code)
    sp = spelling(jax_version)
    levels = ", ".join(f"{rule.severity(t)} on {t}" for t in TARGETS)
    out = [f"# {rule.code} {rule.name}", "", f"{rule.summary} ({levels}).", ""]
    out += ["## What it does", "", rule.what_it_does, ""]
    out += ["## Why is this bad?", "", rule.why_bad, ""]
    for target in TARGETS:
        behaviour = rule.targets[target]
        out.append(f"- `{target}` ({behaviour.severity}): {behaviour.outcome}.")
        if behaviour.message:
            out.append(f"  XLA: `{behaviour.message}`")
    out.append("")
    out += ["## Applies to", "", f"{rule.applies_to}.", ""]
    checked_by = "`offload-fixer run`, `fix` and `analyze()` (the lowered program)"
    if rule.checked_statically:
        checked_by += ", and `offload-fixer check` (the source, without running it)"
    out += ["## Reported by", "", f"{checked_by}.", ""]
    out += [f"## Example (JAX {sp.version})", ""]
    if not rule.applies(sp):
        out += [f"JAX {sp.version} does not produce this pattern (see Applies to); other versions do:", ""]
    out += ["```python", rule.invalid(sp).rstrip("\n"), "```", ""]
    out += ["Use instead:", "", "```python", rule.valid(sp).rstrip("\n"), "```", ""]
    out += ["## Fixes", ""]
    for fix in rule.fixes:
        out.append(f"- {fix.title} ({fix.safety}): {fix.why}")
    out.append("")
    if rule.references:
        out += ["## References", ""] + [f"- {ref}" for ref in rule.references] + [""]
    return "\n".join(out)
