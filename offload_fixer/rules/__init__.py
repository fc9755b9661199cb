"""One :class:`Rule` per diagnostic code, each in its own module (``ofl1200.py``, ...), as
ruff keeps a violation and its documentation together.

A rule module holds everything about its code: the page (what, why, per-target behaviour),
its examples (any number of invalid and valid programs, Fixit style), the tool's message
templates for it, its fix documentation keyed by strategy, and its hook into each engine:
``from_walk`` (the host-offload walk of a lowered module -> diagnostics), ``from_static``
(one offending output leaf of the source check -> diagnostics), ``from_static_compute`` (one
host value the source check finds computed on -> diagnostics) and ``failure_texts`` (how a
compile failure of that code is worded). The engines loop over :func:`all_rules` and never
name a rule, so adding one is adding its module (the recipe is in ``ARCHITECTURE.md``).

The CLI's ``rules`` page, SARIF's ``driver.rules[]`` and the language server's hover text all
read from here, so the explanation a user sees is the same everywhere. XLA's texts of a
backend failure are its rule module's (:func:`xla_texts` gathers them; the host offloader's
own, which the model itself raises, are :mod:`offload_fixer.xla_messages`'s) and each code's
constant is :mod:`offload_fixer.codes`'. A rule module imports neither MLIR nor the static
interpreter: the engines hand their hooks what they need
(:class:`offload_fixer.analysis.diagnose.Diagnoser`, :class:`offload_fixer.analysis.backend.Backend`,
:class:`offload_fixer.static.rules.StaticSite`, :class:`offload_fixer.static.rules.StaticHostCompute`).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.jax_compat import Spelling, spelling
from offload_fixer.model import (
    TARGETS,
    Diagnostic,
    FixOption,
    FixStrategy,
    Origin,
    RematPolicy,
    Role,
    Safety,
    Severity,
    Step,
    XlaVerdict,
)
from offload_fixer.rules.examples import Example, not_for

if TYPE_CHECKING:
    from jaxlib.mlir import ir

    from offload_fixer.analysis.backend import Backend
    from offload_fixer.analysis.diagnose import Diagnoser
    from offload_fixer.analysis.offloader import Failure, Seed, WalkResult
    from offload_fixer.static.rules import StaticHostCompute, StaticSite

WalkHook = Callable[["Diagnoser", "Seed", "WalkResult"], Iterable[Diagnostic]]
"""The dynamic engine's hook: one host value (a seed) of a walked module -> its diagnostics."""
PolicyHook = Callable[["Diagnoser", RematPolicy], Iterable[Diagnostic]]
"""The dynamic engine's hook: one remat offload policy of the traced program -> its diagnostics."""
StaticHook = Callable[["StaticSite"], Iterable[Diagnostic]]
"""The source check's hook: one offending output leaf of a jit site -> its diagnostics."""
StaticComputeHook = Callable[["StaticHostCompute"], Iterable[Diagnostic]]
"""The source check's hook: one host value of a jit site computed on -> its diagnostics."""
FailureText = Callable[[str | None, str], tuple[str, str]]
"""A compile failure's (message, explanation), from XLA's subject name and the target."""
BackendHook = Callable[["Backend"], Iterable["Failure"]]
"""The XLA model's hook: a module as the target's backend finds it once the host offloader has
decided where values live -> the failures of the rule's pattern, in the order the backend meets
them (the rule's ``failure_texts`` word them)."""
BackendStage = Literal["host compute", "loops", "copies", "entry"]
BACKEND_STAGES: tuple[BackendStage, ...] = ("host compute", "loops", "copies", "entry")
"""Where in the backend's pipeline a failure is met, in the order met: the host compute it
builds, loops that carry host buffers, copies between host and device, the entry parameters
and outputs. The compile stops at the first failure, so this order decides the verdict."""
CompiledEvidence = Callable[[XlaVerdict, Diagnostic], str | None]
"""A finding on a program that compiles -> what the compiled program shows of it, in words
(its memory figures), or ``None`` where it does not show it."""


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

    strategy: FixStrategy | None
    """The fix strategy this remedy is (``--strategy``); ``None``: advice no codemod makes."""
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
    """In the page's order; each engine asks for one by strategy (:meth:`fix`)."""
    applies_to: str
    """Which JAX versions can produce the pattern, in words."""
    invalid: tuple[Example, ...]
    """Programs that show the pattern; the first is the page's."""
    valid: tuple[Example, ...]
    """Programs that avoid it; the first is the page's "Use instead"."""
    references: tuple[str, ...] = ()
    applies: Callable[[Spelling], bool] = lambda sp: True
    """Whether a JAX version (its spelling) can produce the pattern: where it cannot, the
    invalid example is a program that version accepts, and the examples' tests say so."""
    from_walk: WalkHook | None = None
    from_policy: PolicyHook | None = None
    """A remat offload policy of the traced program (what the lowered module cannot show)."""
    from_static: StaticHook | None = None
    from_static_compute: StaticComputeHook | None = None
    backend: BackendHook | None = None
    """For a failure of the target's backend: where the XLA model finds the rule's pattern."""
    backend_stage: BackendStage = "host compute"
    """Where in the backend's pipeline :attr:`backend`'s failures are met (:data:`BACKEND_STAGES`)."""
    failure_texts: Mapping[msg.XlaMessage, FailureText] = field(default_factory=dict)
    """XLA's texts of this code's compile failures, each with how it is worded for the user:
    a backend failure's texts are declared in its rule module, the host offloader's are
    :mod:`offload_fixer.xla_messages`'s."""
    failure_fix: FixStrategy = "device"
    """The remedy a compile failure of this code offers."""
    compiled_evidence: CompiledEvidence | None = None
    """For a finding XLA neither rejects nor logs: how ``--confirm`` and the fidelity script
    read it from the compiled program."""
    judged_by_jax: bool = False
    """JAX itself refuses the pattern, where :attr:`applies`, before any compiler sees it: the
    examples are programs run as they are (eager code, no ``f`` to lower), and the tests run
    them (each invalid one raises, each valid one runs). ``run`` and the API report the refusal
    of a jitted function from JAX's error (``offload_fixer.trace_refusals``); an eager one is the
    program's failure."""
    static_scope: str = ""
    """Where the source check reports only part of what the rule covers: that part, in words
    (its pages' examples are then not the source check's; its tests are)."""

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
        return self.invalid[0](spelling(jax_version))

    def valid_example(self, jax_version: str | None = None) -> str:
        return self.valid[0](spelling(jax_version))

    def examples(self, kind: str, jax_version: str | None = None, target: str | None = None) -> tuple[str, ...]:
        """Every ``invalid`` or ``valid`` program, rendered for a JAX version; with ``target``,
        those its compiler can be given (:meth:`examples_not_for` says why not the others)."""
        sp = spelling(jax_version)
        chosen = self.invalid if kind == "invalid" else self.valid
        return tuple(example(sp) for example in chosen if target is None or not_for(example, target) is None)

    def examples_not_for(self, kind: str, target: str) -> tuple[str, ...]:
        """Why each ``invalid`` or ``valid`` program that ``target``'s compiler cannot be given is left out."""
        chosen = self.invalid if kind == "invalid" else self.valid
        return tuple(reason for example in chosen if (reason := not_for(example, target)) is not None)

    def fix(self, strategy: FixStrategy) -> FixDoc:
        """The documented remedy of ``strategy``: by strategy, never by position."""
        for doc in self.fixes:
            if doc.strategy == strategy:
                return doc
        raise KeyError(f"{self.code} documents no {strategy!r} fix")

    def fix_option(self, strategy: FixStrategy, description: str | None = None) -> FixOption:
        """The remedy as a diagnostic offers it: the page's title and safety, in every engine;
        ``description`` is how to make it where the engine spells it for the JAX version."""
        doc = self.fix(strategy)
        return FixOption(strategy, doc.title, doc.why if description is None else description, doc.safety)


@dataclass(frozen=True)
class ToolMessage:
    """The tool's own message templates, by code (mypy's ``message_registry``): what a
    diagnostic says where XLA prints nothing yet (the source check) or nothing at all. Each
    sits in its rule's module."""

    code: str
    template: str
    """``str.format`` template."""

    def format(self, **fields: object) -> str:
        return self.template.format(**fields)


def origin_phrase(origin: Origin) -> str:
    """How a diagnostic's explanation names where its host value comes from."""
    return {
        "host_argument": "A host-memory argument",
        "move_to_host": "A value moved to host memory",
        "offload_policy": "A residual offloaded to host by a checkpoint policy",
        "host_compute": "A value computed on host",
    }[origin.kind]


def at_host_op(rule: Rule, d: Diagnoser, seed: Seed, op: ir.Operation, message: str, explanation: str) -> Diagnostic:
    """A walk hook's diagnostic at one instruction that runs on the host over the seed's value
    (a slice, a copy), whose fix is a move to device."""
    origin = d.origin(seed)
    return Diagnostic(
        code=rule.code,
        severity=rule.severity(d.target),
        target=d.target,
        message=message,
        explanation=explanation,
        origin=origin,
        trace=(Step(op.name, Role.HOST_COMPUTE, d.span(op)),),
        span=d.span(op) or origin.span,
        fixes=(rule.fix_option("device"),),
        function=d.function,
    )


def on_branch(branch: str, path: str, line: int, explanation: str) -> str:
    """A source check's explanation of a finding that holds on one branch of a configuration ``if``."""
    return (
        f"The value is host memory only on the branch taken when {branch} (the `if` at {path}:{line}); "
        "the check cannot tell how the program is configured, and that branch is reachable, so it "
        f"reports what happens there. {explanation}"
    )


def same_everywhere(severity: Severity, outcome: str, message: str | None) -> dict[str, TargetBehaviour]:
    return {target: TargetBehaviour(severity, outcome, message) for target in TARGETS}


@dataclass(frozen=True)
class ToolCode:
    """A code of the tool itself, not of the analysis (:data:`offload_fixer.codes.TOOL_NAMES`):
    a short page, no examples, the same severity on every target."""

    code: str
    summary: str
    what_it_does: str

    @property
    def name(self) -> str:
        return codes.TOOL_NAMES[self.code]

    def page(self) -> str:
        return f"# {self.code} {self.name}\n\n{self.summary} (error on every target).\n\n## What it does\n\n{self.what_it_does}\n"


TOOL_CODES: tuple[ToolCode, ...] = (
    ToolCode(
        codes.IO_ERROR,
        "A path `offload-fixer check` was given or found cannot be read",
        "Reports a file or directory that `check` could not read: a path that does not exist, a file or "
        "directory it may not read, a symlink loop or a dangling link, a FIFO or device named like a Python "
        "file (refused by its type, never read). It is one finding among the others, as ruff's E902 "
        "`io-error`: every other path is still checked and reported, and the exit status is 1. Where the "
        "code is not selected (`--select`, `--ignore`), the path is named in a warning on stderr instead. "
        "A file that is read but is not Python text, or does not parse, is a file error (exit status 4).",
    ),
)
"""The tool's own codes, listed by ``offload-fixer rules`` before the rules of the analysis."""


class UnknownRule(KeyError):
    """A code or rule name that no rule has."""

    def __str__(self) -> str:
        return str(self.args[0])


_RULE_MODULE = re.compile(r"ofl\d{4}")


@functools.cache
def all_rules() -> tuple[Rule, ...]:
    """Every rule in code order (the order SARIF's ``rules[]`` indexes): each ``oflNNNN``
    module of this package, found on first use, so a new rule is a new module only."""
    found = (
        importlib.import_module(f"{__name__}.{module.name}").RULE
        for module in pkgutil.iter_modules(__path__)
        if _RULE_MODULE.fullmatch(module.name)
    )
    return tuple(sorted(found, key=lambda rule: codes.ALL_CODES.index(rule.code)))


@functools.cache
def xla_texts() -> tuple[msg.XlaMessage, ...]:
    """Every XLA text a rule words (``failure_texts``), once, in code order."""
    return tuple(dict.fromkeys(message for rule in all_rules() for message in rule.failure_texts))


def backend_messages() -> tuple[msg.XlaMessage, ...]:
    """What the TPU and GPU backends say when they cannot build what the host offloader decided."""
    return tuple(message for message in xla_texts() if message not in msg.HOST_OFFLOADER_MESSAGES)


def backend_codes(message: str) -> frozenset[str]:
    """The codes of every backend failure whose text ``message`` holds: one code, or several
    where rules share XLA's text (libtpu's async-start shape check: OFL1207, OFL1212)."""
    return frozenset(known.code for known in backend_messages() if known.code and known.pattern().search(message))


def rule_codes(message: str) -> frozenset[str]:
    """The codes of every text a rule words, the host offloader's included, that ``message``
    holds: several where rules share one (libtpu 0.0.42.1's ``host_offload_utils.cc:98`` CHECK:
    OFL1205's loop condition, OFL1216's kernel)."""
    return frozenset(known.code for known in xla_texts() if known.code and known.pattern().search(message))


@functools.cache
def _lookup() -> tuple[dict[str, Rule], dict[str, Rule]]:
    rules = all_rules()
    return {rule.code: rule for rule in rules}, {rule.name: rule for rule in rules}


def get_rule(code_or_name: str) -> Rule:
    """Look a rule up by code (``OFL1200``, any case) or by name (``host-value-device-output``)."""
    key = code_or_name.strip()
    by_code, by_name = _lookup()
    rule = by_code.get(key.upper()) or by_name.get(key.lower())
    if rule is None:
        close = difflib.get_close_matches(key, [*by_code, *by_name], n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known codes: {', '.join(by_code)}"
        raise UnknownRule(f"no rule {code_or_name!r}{hint}")
    return rule


def tool_code(code_or_name: str) -> ToolCode | None:
    """The tool's own code (``OFL0902``, ``io-error``), if ``code_or_name`` names one."""
    key = code_or_name.strip()
    return next((tool for tool in TOOL_CODES if key.upper() == tool.code or key.lower() == tool.name), None)


def render_rule(code: str, jax_version: str | None = None) -> str:
    """The text page ``offload-fixer rules CODE`` prints (markdown that reads as plain text)."""
    tool = tool_code(code)
    if tool is not None:
        return tool.page()
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
            out.append(f"  {'JAX' if rule.judged_by_jax else 'XLA'}: `{behaviour.message}`")
    out.append("")
    out += ["## Applies to", "", f"{rule.applies_to}.", ""]
    checked_by = "`offload-fixer run`, `fix` and `analyze()` (the lowered program)"
    if rule.judged_by_jax:
        checked_by = (
            "`offload-fixer check` (the source, without running it); `offload-fixer run` and "
            "`check(fn, ...)` from JAX's error where it refuses a jitted function (the committed "
            "host arguments it names, each with the move that fixes it); `run` shows an eager "
            "operation's refusal as the program's failure"
        )
    elif rule.checked_statically:
        checked_by += ", and `offload-fixer check` (the source, without running it)"
        if rule.static_scope:
            checked_by += f" for {rule.static_scope}"
    elif rule.code in codes.EAGER_STATIC_CODES:
        checked_by += ", and `offload-fixer check` in code outside any jit (the source, without running it)"
    out += ["## Reported by", "", f"{checked_by}.", ""]
    out += [f"## Example (JAX {sp.version})", ""]
    if not rule.applies(sp):
        out += [f"JAX {sp.version} does not produce this pattern (see Applies to); other versions do:", ""]
    out += ["```python", rule.invalid[0](sp).rstrip("\n"), "```", ""]
    out += ["Use instead:", "", "```python", rule.valid[0](sp).rstrip("\n"), "```", ""]
    out += ["## Fixes", ""]
    for fix in rule.fixes:
        out.append(f"- {fix.title} ({fix.safety}): {fix.why}")
    out.append("")
    if rule.references:
        out += ["## References", ""] + [f"- {ref}" for ref in rule.references] + [""]
    return "\n".join(out)
