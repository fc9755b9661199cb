"""Diagnostics -> fix plans: which file, function, jit site, returns and outputs a codemod
edits, with which strategy, and how safe the edit is.

Diagnostics that share an origin (``Origin.key``) share one root cause and become one plan:
one edit where the host value enters the computation, or one edit per output it reaches.
Each plan is dry-run against the file, so its safety, its edits and the reasons an edit is
not possible are known before anything is written. See ``README.md`` in this package for
the strategy rule and the safety labels.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.metadata import MetadataWrapper, PositionProvider

from codemods.fix_command import FixCommand
from codemods.host_output import HostOutputCommand
from codemods.move_to_device import MoveToDeviceCommand
from codemods.pin_host_memory import PinHostMemoryCommand
from codemods.source_facts import FunctionInfo, SourceFacts
from codemods.targets import Edit, FixTarget, SpellingOptions
from offload_fixer import jax_compat
from offload_fixer.fixes.errors import FixError
from offload_fixer.fixes.source_io import (
    decode_source,
    parse_source,
    read_source,
    sha256_of,
)
from offload_fixer.model import Diagnostic, Origin, Report, Safety, Span

FIXABLE_CODES = ("OFL1200",)
HOST_COMPUTE_ROLE = "host compute"
COMMANDS: Mapping[str, type[FixCommand]] = {
    "move_to_device": MoveToDeviceCommand,
    "host_output": HostOutputCommand,
    "pin_host_memory": PinHostMemoryCommand,
}

RATIONALE = {
    "move_to_host": (
        "host",
        ("your code moved this value to host on purpose (offloaded state): keep it there "
         "and declare the output as host memory"),
    ),
    "host_argument": (
        "device",
        ("the argument is streamed from host by in_shardings: moving it to device where it "
         "enters the computation fixes every output it reaches"),
    ),
    "offload_policy": (
        "device",
        ("these are residuals a remat offload policy put on host for the backward pass; "
         "returning them is incidental, so move them back to device"),
    ),
    "host_compute": (
        "device",
        ("the value was computed on host (compute_on); return it in device memory like "
         "the function's other results"),
    ),
    None: ("device", "the origin of the host value is unknown: move it back to device where it is returned"),
}
TYPED_GAP_RATIONALE = (
    "JAX >= 0.7.1 types an argument with a host in_sharding that is traced from an abstract, NumPy "
    "or uncommitted value as device memory and drops a same-space device_put, so only declaring the "
    "output as host memory fixes it (or give in_shardings a device sharding)"
)
TYPED_GAP_DEVICE_NOTE = (
    "the host-output fix was not possible, so the argument is moved to device instead; JAX >= 0.7.1 "
    "types it as device memory, and a version that drops a same-space device_put would leave the "
    "error in place: check the function again after applying"
)
NONE_LEAF_NOTE = (
    "JAX {version} (< 0.4.29): a None out_shardings leaf never inherits host memory, so the host "
    "output gets an explicit sharding; the other outputs keep None, which means what it meant before"
)


@dataclass(frozen=True)
class FixPlan:
    """One fix for one root cause in one file: what the codemod gets and what it will do."""

    path: str
    strategy: Literal["device", "host"]
    command: Literal["move_to_device", "host_output", "pin_host_memory"]
    target: FixTarget
    safety: Safety
    title: str
    rationale: str
    origin_key: str
    diagnostics: tuple[Diagnostic, ...]
    source_sha256: str | None
    edits: tuple[Edit, ...] = ()
    problems: tuple[str, ...] = ()
    """Why the edit (or part of it) cannot be made; a display-only plan lists them."""
    notes: tuple[str, ...] = ()

    @property
    def output_paths(self) -> tuple[str, ...]:
        return self.target.output_paths

    @property
    def unsafe_reasons(self) -> tuple[str, ...]:
        return tuple(e.reason for e in self.edits if e.safety == "unsafe")


def plan_fixes(
    diagnostics: Report | Iterable[Diagnostic] | Mapping[str, Any],
    strategy: str = "auto",
    jax_version: str | None = None,
    *,
    texts: Mapping[str, bytes] | None = None,
) -> list[FixPlan]:
    """Plans for the OFL1200 diagnostics of a report (object or its JSON dict) or a list.

    ``strategy``: ``device`` (move back to device), ``host`` (declare host outputs) or
    ``auto`` (per origin; see the package README). ``jax_version`` picks the spelling;
    default: the report's version, else the installed one. ``texts``: file contents to
    plan against instead of the files on disk (an editor's unsaved buffer), by path.
    """
    if strategy not in ("auto", "device", "host"):
        raise ValueError(f"unknown strategy {strategy!r}; expected auto, device or host")
    if isinstance(diagnostics, Mapping):
        diagnostics = Report.from_dict(dict(diagnostics))
    if isinstance(diagnostics, Report):
        jax_version = jax_version or diagnostics.jax_version or None
        diagnostics = diagnostics.diagnostics
    spelling = jax_compat.spelling(jax_version)
    sources = _Sources(texts or {})
    groups: dict[tuple[Any, ...], list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        if diagnostic.code in FIXABLE_CODES:
            groups.setdefault(root_cause_key(diagnostic), []).append(diagnostic)
    prepared = [_prepare(group, strategy, spelling, sources) for group in groups.values()]
    first_attempts: dict[tuple[str, str], list[FixTarget]] = {}
    for group in prepared:
        if group.source is not None and group.source.module is not None:
            command, target = group.first_attempt()
            first_attempts.setdefault((group.source.path, command), []).append(target)
    for (path, command), targets in first_attempts.items():
        sources.get(path).prefetch(command, targets)
    return [_plan_group(group, spelling) for group in prepared]


# ---------------------------------------------------------------------------------------
# Strategy and placement
def choose_strategy(origin: Origin | None, requested: str, spelling: jax_compat.Spelling) -> tuple[str, str]:
    """(strategy, why). The ``in_shardings`` gap of JAX >= 0.7.1 always takes the host fix."""
    kind = origin.kind if origin is not None else None
    if _typed_gap(origin, spelling):
        return "host", TYPED_GAP_RATIONALE
    if requested != "auto":
        return requested, f"strategy {requested} was requested"
    return RATIONALE.get(kind, RATIONALE[None])


def _attempts(strategy: str, requested: str, origin: Origin | None, diagnostics: Sequence[Diagnostic],
              spelling: jax_compat.Spelling) -> list[tuple[str, str]]:
    """(strategy, placement) to try in order: where the fix belongs first, then fallbacks
    (``auto``, or a device request the JAX >= 0.7.1 gap turned into host). A value moved to
    ``unpinned_host`` is kept on host by spelling ``pinned_host`` at the move (from 0.4.29 the
    output's memory kind follows it), before any ``out_shardings`` edit."""
    kind = origin.kind if origin is not None else None
    device: list[tuple[str, str]] = []
    if kind == "host_argument":
        device.append(("device", "entry"))
    elif origin is not None and origin.span is not None and _has_host_compute(diagnostics):
        device.append(("device", "after_origin"))
    device.append(("device", "return"))
    host = [("host", "out_shardings")]
    if _unpinned_move(origin) and spelling.regime is not jax_compat.Regime.LEGACY:
        host.insert(0, ("host", "pin_memory"))
    if strategy == "host":
        return host if requested == "host" else host + device
    return device if requested == "device" else device + host


def _unpinned_move(origin: Origin | None) -> bool:
    return (origin is not None and origin.kind == "move_to_host" and origin.memory_kind == "unpinned_host"
            and origin.span is not None)


def _typed_gap(origin: Origin | None, spelling: jax_compat.Spelling) -> bool:
    return origin is not None and origin.kind == "host_argument" and spelling.regime is jax_compat.Regime.TYPED


def _has_host_compute(diagnostics: Sequence[Diagnostic]) -> bool:
    return any(step.role == HOST_COMPUTE_ROLE for d in diagnostics for step in d.trace)


# ---------------------------------------------------------------------------------------
# One group -> one plan
@dataclass
class _Group:
    diagnostics: list[Diagnostic]
    strategy: str
    rationale: str
    target: FixTarget
    attempts: list[tuple[str, str]]
    source: _Source | None
    base: dict[str, Any]

    def first_attempt(self) -> tuple[str, FixTarget]:
        strategy, placement = self.attempts[0]
        return _command(strategy, placement), replace(self.target, placement=placement)


def _prepare(group: list[Diagnostic], requested: str, spelling: jax_compat.Spelling, sources: _Sources) -> _Group:
    first = group[0]
    path = _source_path(first)
    strategy, rationale = choose_strategy(first.origin, requested, spelling)
    notes = (NONE_LEAF_NOTE.format(version=spelling.version),) if not spelling.none_leaf_inherits_host else ()
    source = sources.get(path) if path else None
    sha = getattr(first, "source_sha256", None) or (source.sha256 if source else None)
    base = {"path": path or "", "rationale": rationale, "origin_key": _origin_key(first),
            "diagnostics": tuple(group), "source_sha256": sha, "notes": notes}
    target = _target(group, path, _output_paths(group), spelling, source)
    attempts = _attempts(strategy, requested, first.origin, group, spelling)
    return _Group(group, strategy, rationale, target, attempts, source, base)


def _plan_group(group: _Group, spelling: jax_compat.Spelling) -> FixPlan:
    source, target, strategy, base = group.source, group.target, group.strategy, group.base
    origin = group.diagnostics[0].origin
    if source is None or source.error is not None:
        problem = source.error if source is not None else "the diagnostic names no source file"
        return FixPlan(strategy=strategy, command=_command(strategy), target=target, safety="display-only",  # type: ignore[arg-type]
                       title=_title(strategy, "return" if strategy == "device" else "out_shardings", target),
                       problems=(problem,), **base)
    problems: list[str] = []
    for attempt_strategy, placement in group.attempts:
        attempt = replace(target, placement=placement)
        command = _command(attempt_strategy, placement)
        run = source.dry_run(command, attempt)
        if run.edits or (run.satisfied and not run.problems):
            safety: Safety = "unsafe" if any(e.safety == "unsafe" for e in run.edits) else "safe"
            why = group.rationale if attempt_strategy == strategy else (
                f"{group.rationale}; that fix is not possible here ({'; '.join(problems)}), so the other one is used")
            extra = (TYPED_GAP_DEVICE_NOTE,) if attempt_strategy == "device" and _typed_gap(origin, spelling) else ()
            return FixPlan(strategy=attempt_strategy, command=command, target=attempt, safety=safety,  # type: ignore[arg-type]
                           title=_title(attempt_strategy, placement, attempt), edits=tuple(run.edits),
                           problems=tuple(run.problems),
                           **{**base, "rationale": why, "notes": base["notes"] + extra})
        problems.extend(run.problems)
    return FixPlan(strategy=strategy, command=_command(strategy), target=target, safety="display-only",  # type: ignore[arg-type]
                   title=_title(strategy, "return" if strategy == "device" else "out_shardings", target),
                   problems=tuple(dict.fromkeys(problems)), **base)


def _target(group: list[Diagnostic], path: str | None, output_paths: tuple[str, ...],
            spelling: jax_compat.Spelling, source: _Source | None) -> FixTarget:
    first = group[0]
    function = first.function
    origin_span = _in_file(first.origin.span if first.origin else None, path)
    return_spans = [_in_file(d.return_span, path) for d in group]
    function_line = function.line if function is not None and _same_file(function.path, path) else None
    inner_line = origin_span.line if origin_span else next((s.line for s in return_spans if s), None)
    target = FixTarget(
        function_name=function.name if function is not None else None,
        function_line=function_line,
        inner_line=inner_line,
        output_paths=output_paths,
        return_lines=tuple(sorted({s.line for s in return_spans if s})) if all(return_spans) else (),
        origin_line=origin_span.line if origin_span else None,
        origin_col=origin_span.col if origin_span else None,
        spelling=SpellingOptions(
            api="memory_space" if spelling.memory_space_api else "sharding",
            device_kind=spelling.device_kind,
            host_kind=spelling.host_kind,
        ),
    )
    if first.origin is not None and first.origin.kind == "host_argument" and source is not None:
        parameter = source.host_parameter(target, first.origin)
        if parameter is not None:
            target = replace(target, parameter=parameter[0], parameter_path=parameter[1])
    return target


def _command(strategy: str, placement: str | None = None) -> str:
    if placement == "pin_memory":
        return "pin_host_memory"
    return "host_output" if strategy == "host" else "move_to_device"


def _title(strategy: str, placement: str, target: FixTarget) -> str:
    outputs = ", ".join(f"output {p}" if p else "the result" for p in target.output_paths)
    if placement == "pin_memory":
        return f"Move to pinned_host instead of unpinned_host (line {target.origin_line}), so {outputs} stay host memory"
    if strategy == "host":
        return f"Declare {outputs} as {target.spelling.host_kind} memory in out_shardings"
    if placement == "entry":
        return f"Move argument {target.parameter} to device where the function starts"
    if placement == "after_origin":
        return f"Move the offloaded value back to device before it is computed on (line {target.origin_line})"
    return f"Move {outputs} back to device where it is returned"


# ---------------------------------------------------------------------------------------
# Reading diagnostics
def _source_path(d: Diagnostic) -> str | None:
    candidates = [
        d.function.path if d.function else None,
        d.origin.span.path if d.origin and d.origin.span else None,
        d.return_span.path if d.return_span else None,
        d.span.path if d.span else None,
    ]
    return next((p for p in candidates if p), None)


def _origin_key(d: Diagnostic) -> str:
    origin = d.origin
    if origin is None:
        return f"output:{d.output_path}"
    if origin.key:
        return origin.key
    span = origin.span
    return f"{origin.kind}:{span.path}:{span.line}:{span.col}" if span else f"{origin.kind}:{origin.detail}"


def root_cause_key(d: Diagnostic) -> tuple[Any, ...]:
    """By origin; the leaves of one streamed argument (one origin each) are one root cause."""
    function = (d.function.name, d.function.line) if d.function else None
    origin = _origin_key(d)
    if d.origin is not None and d.origin.kind == "host_argument" and d.origin.argument:
        origin = f"argument:{_split_argument(d.origin.argument)[0]}"
    return (_source_path(d), function, origin)


def _output_paths(group: Sequence[Diagnostic]) -> tuple[str, ...]:
    paths: list[str] = []
    for d in group:
        paths.append(d.output_path or "")
        paths.extend(d.related_outputs)
    return tuple(dict.fromkeys(paths))


def _same_file(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is None
    return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


def _in_file(span: Span | None, path: str | None) -> Span | None:
    return span if span is not None and _same_file(span.path, path) else None


def _split_argument(label: str) -> tuple[str, str]:
    """``params['mu'].count`` -> (``params``, ``['mu'].count``): JAX's argument label."""
    end = 0
    while end < len(label) and (label[end].isalnum() or label[end] == "_"):
        end += 1
    return label[:end], label[end:]


# ---------------------------------------------------------------------------------------
# Source files: read once, parsed once, dry runs against the parsed module
@dataclass
class _DryRun:
    edits: list[Edit]
    problems: list[str]
    satisfied: list[str]


@dataclass
class _Source:
    path: str
    sha256: str | None = None
    module: cst.Module | None = None
    error: str | None = None
    _facts: SourceFacts | None = field(default=None, repr=False)

    _runs: dict[tuple[str, FixTarget], _DryRun] = field(default_factory=dict, repr=False)

    def prefetch(self, command: str, targets: Sequence[FixTarget]) -> None:
        """Dry-run several targets in one pass over the file (one parse, one set of positions)."""
        assert self.module is not None
        codemod = COMMANDS[command](CodemodContext(filename=self.path), targets=targets)
        codemod.transform_module(self.module)
        for target, outcome in zip(targets, codemod.outcomes):
            if not outcome.deferred:
                self._runs[(command, target)] = _DryRun(outcome.edits, outcome.problems, outcome.satisfied)

    def dry_run(self, command: str, target: FixTarget) -> _DryRun:
        if (command, target) not in self._runs:
            self.prefetch(command, [target])
        return self._runs[(command, target)]

    def facts(self) -> SourceFacts:
        if self._facts is None:
            assert self.module is not None
            wrapper = MetadataWrapper(self.module)
            self._facts = SourceFacts.collect(wrapper.module, wrapper.resolve(PositionProvider))
        return self._facts

    def host_parameter(self, target: FixTarget, origin: Origin) -> tuple[str, str] | None:
        """(parameter, pytree path inside it) a host-argument origin names: by its span inside
        the signature, else by its label (``NAME['key']...``), else by its flat index when every
        parameter is a single array."""
        facts = self.facts()
        function = facts.find_function(target.function_name, target.function_line, target.inner_line)
        if function is None:
            return None
        params = _parameters(function)
        names = [name for name, _ in params]
        span = origin.span
        if span is not None and _same_file(span.path, self.path):
            for name, node in params:
                where = facts.positions[node]
                if where.start.line <= span.line <= where.end.line and (
                    where.start.line != span.line or where.start.column < span.col <= where.end.column + 1
                ):
                    return name, ""
        if origin.argument:
            name, path = _split_argument(origin.argument)
            if name in names:
                return name, path
        index = origin.argument_index
        if index is not None and len(names) == len(function.positional_params) > index:
            return function.positional_params[index], ""
        return None


def _parameters(function: FunctionInfo) -> list[tuple[str, cst.Param]]:
    params = function.node.params
    return [(p.name.value, p) for p in [*params.posonly_params, *params.params, *params.kwonly_params]]


class _Sources:
    def __init__(self, texts: Mapping[str, bytes]) -> None:
        self._texts = {os.path.abspath(path): data for path, data in texts.items()}
        self._cache: dict[str, _Source] = {}

    def get(self, path: str) -> _Source:
        if path not in self._cache:
            self._cache[path] = self._load(path)
        return self._cache[path]

    def _load(self, path: str) -> _Source:
        try:
            data = self._texts.get(os.path.abspath(path))
            if data is None:
                data = read_source(path)
            decode_source(path, data)
            return _Source(path, sha256_of(data), parse_source(path, data))
        except FixError as exc:
            return _Source(path, error=str(exc))
