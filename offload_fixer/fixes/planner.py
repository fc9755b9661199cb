"""Diagnostics -> fix plans: which file, function, jit site, returns and outputs the codemods
edit, with which strategy, and how safe the edits are.

Diagnostics that share a root cause (``Origin.key``; for a streamed argument, the argument)
become one plan, whatever their codes: the OFL1200 outputs it reaches, the OFL1201/OFL1206
computations on it and its OFL1204 spelling are fixed together. A plan is made of parts (the
move to device, the declaration of host outputs, the respelled memory kind), each tried in
order of preference against the file (a dry run of its codemod), so the plan's edits, its
safety, the diagnostics it fixes and the reasons an edit is not possible are known before
anything is written. See ``README.md`` in this package for the rules and the safety labels.

It is one module of about 850 lines on purpose: the parts, attempts and dry runs of a plan
share one group's state (its target, its source file cut into statements, its places), and
split apart they would pass that state back and forth. Its sections: the plans, the
strategy, groups and parts, reading diagnostics, the source files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.metadata import MetadataWrapper, PositionProvider

from offload_fixer import jax_compat
from offload_fixer.codemods.fix_command import FixCommand
from offload_fixer.codemods.host_output import HostOutputCommand
from offload_fixer.codemods.move_to_device import MoveToDeviceCommand
from offload_fixer.codemods.pin_host_memory import PinHostMemoryCommand
from offload_fixer.codemods.pytree_source import literal_paths, locate, returned_values
from offload_fixer.codemods.source_facts import FunctionInfo, SourceFacts
from offload_fixer.codemods.state_flow import StateFlow
from offload_fixer.codemods.targets import Edit, FixTarget, SpellingOptions
from offload_fixer.codes import HOST_COMPUTE_CODES, HOST_VALUE_DEVICE_OUTPUT, UNPINNED_HOST_MEMORY
from offload_fixer.findings import origin_key, root_cause_key, source_path, split_argument
from offload_fixer.fixes.errors import FixError
from offload_fixer.fixes.excerpt import FileOutline
from offload_fixer.fixes.source_io import decode_source, read_source, sha256_of
from offload_fixer.model import (
    FIX_STRATEGIES,
    HOST_KINDS,
    STRATEGIES,
    UNPINNED_HOST,
    Diagnostic,
    FixOption,
    Origin,
    OutputInfo,
    PathKey,
    Report,
    Role,
    Safety,
    Span,
    format_output_path,
    parse_output_path,
)

FIXABLE_CODES = (HOST_VALUE_DEVICE_OUTPUT, UNPINNED_HOST_MEMORY, *HOST_COMPUTE_CODES)
"""Computations on a host value: fixed by moving it to device before them."""
Job = tuple[type[FixCommand], FixTarget]
"""One edit to make: the codemod (a :class:`FixCommand` class) and its target."""

RATIONALE = {
    "move_to_host": (
        "host",
        (
            "your code moved this value to host on purpose (offloaded state): keep it there "
            "and declare the output as host memory"
        ),
    ),
    "host_argument": (
        "device",
        (
            "the argument is streamed from host by in_shardings: moving it to device where the function "
            "reads it fixes every output it reaches, and the state it becomes stays declared host memory"
        ),
    ),
    "offload_policy": (
        "device",
        (
            "these are residuals a remat offload policy put on host for the backward pass; "
            "returning them is incidental, so move them back to device"
        ),
    ),
    "host_compute": (
        "device",
        ("the value was computed on host (compute_on); return it in device memory like the function's other results"),
    ),
    None: ("device", "the origin of the host value is unknown: move it back to device where it is returned"),
}
COMPUTED_ON_RATIONALE = (
    "the offloaded value is computed on before it is returned, which XLA would run on the host CPU: "
    "move it back to device where it is computed on, so the result is a device value like the output"
)
STREAMED_PASS_THROUGH_RATIONALE = (
    "the streamed argument reaches the output without being computed on: declare that output host "
    "memory, so the state that enters as host leaves as host"
)
STREAMED_HOST_NOTE = (
    "declaring the outputs computed from a streamed argument host memory would leave that computation "
    "to the host CPU, which the released TPU compiler rejects or aborts on (libtpu 0.0.42.1 and 0.0.50.1: "
    "an async-start shape mismatch, a failed check in hlo_host_compute_alias_assigner; moved to device "
    "first, a donated device parameter declared host is an unimplemented HBM-to-HBM DMA); the argument is "
    "moved to device for the computation instead, and the state returned stays host memory"
)
NONE_LEAF_NOTE = (
    "JAX {version} (< 0.4.29): a None out_shardings leaf never inherits host memory, so the host "
    "output gets an explicit sharding; the other outputs keep None, which means what it meant before"
)


@dataclass(frozen=True)
class FixPlan:
    """One fix for one root cause in one file: the codemod jobs and what they will do."""

    path: str
    strategy: Literal["device", "host"]
    codemod: type[FixCommand]
    """What makes the edit: :class:`MoveToDeviceCommand`, :class:`HostOutputCommand` or
    :class:`PinHostMemoryCommand`, held, not named."""
    target: FixTarget
    safety: Safety
    title: str
    """What the fix does and where, for a ``fix (...)`` line or a quick fix."""
    rationale: str
    origin_key: str
    diagnostics: tuple[Diagnostic, ...]
    source_sha256: str | None
    edits: tuple[Edit, ...] = ()
    problems: tuple[str, ...] = ()
    """Why the edit (or part of it) cannot be made; a display-only plan lists them."""
    notes: tuple[str, ...] = ()
    more_jobs: tuple[Job, ...] = ()
    """Further (codemod, target) edits of the same fix (a streamed argument moved to device
    and the state it becomes declared host, say)."""
    covered: tuple[Diagnostic, ...] = ()
    """The diagnostics these edits fix (a display-only plan fixes none)."""

    @property
    def jobs(self) -> tuple[Job, ...]:
        """Every (codemod, target) the fix runs, the main one first."""
        return ((self.codemod, self.target), *self.more_jobs)

    @property
    def output_paths(self) -> tuple[str, ...]:
        return self.target.output_paths

    @property
    def unsafe_reasons(self) -> tuple[str, ...]:
        return tuple(e.reason for e in self.edits if e.safety == "unsafe")


def plan_fixes(
    diagnostics: Report | Iterable[Report] | Iterable[Diagnostic] | Mapping[str, Any],
    strategy: str = "auto",
    jax_version: str | None = None,
    *,
    texts: Mapping[str, bytes] | None = None,
    reports: Iterable[Report] = (),
    places: Mapping[str, Callable[[int], str]] | None = None,
) -> list[FixPlan]:
    """Plans for the fixable diagnostics of a report (object or its JSON dict), of several
    reports, or of a list of diagnostics.

    ``strategy``: ``device`` (move back to device), ``host`` (declare host outputs) or
    ``auto`` (per origin; see the package README). ``jax_version`` picks the spelling;
    default: the report's version, else the installed one. ``texts``: file contents to
    plan against instead of the files on disk (an editor's unsaved buffer), by path.
    ``reports``: where plain diagnostics come from, for the output tree of each function
    (``Report.outputs``), which host-output fixes mirror. ``places``: how titles name a line
    of a file whose lines are not the user's (a program of notebook cells: ``In [5], line 3``);
    a notebook's lines are named by its cells without it.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; expected auto, device or host")
    if isinstance(diagnostics, Mapping):
        diagnostics = Report.from_dict(dict(diagnostics))
    if isinstance(diagnostics, Report):
        diagnostics = [diagnostics]
    entries: list[Report | Diagnostic] = list(diagnostics)
    reports = list(reports)
    given_reports = [entry for entry in entries if isinstance(entry, Report)]
    if given_reports and len(given_reports) == len(entries):
        reports += given_reports
        items = [d for report in given_reports for d in report.diagnostics]
    else:
        items = [entry for entry in entries if isinstance(entry, Diagnostic)]
        if len(items) != len(entries):
            raise TypeError("plan_fixes takes reports or diagnostics, not a mix of both")
    jax_version = jax_version or next((r.jax_version for r in reports if r.jax_version), None)
    outputs: dict[Diagnostic, tuple[OutputInfo, ...]] = {}
    for report in reports:
        for d in report.diagnostics:
            outputs.setdefault(d, report.outputs)
    spelling = jax_compat.spelling(jax_version)
    sources = _Sources(texts or {})
    groups: dict[tuple[Any, ...], list[Diagnostic]] = {}
    for diagnostic in items:
        if diagnostic.code in FIXABLE_CODES:
            groups.setdefault(root_cause_key(diagnostic), []).append(diagnostic)
    ordered = sorted(groups.values(), key=_origin_order)  # run and check list findings in different orders
    prepared = [_Group.prepare(group, strategy, spelling, sources, outputs) for group in ordered]
    first_attempts: dict[tuple[str, type[FixCommand]], list[FixTarget]] = {}
    for group in prepared:
        if group.source is not None and group.source.outline is not None:
            for part in group.parts:
                attempt = part.attempts[0]
                first_attempts.setdefault((group.source.path, attempt.codemod), []).append(attempt.target)
    for (path, codemod), targets in first_attempts.items():
        sources.get(path).prefetch(codemod, list(dict.fromkeys(targets)))
    return [group.plan(spelling, _placer(group.base["path"], places or {})) for group in prepared]


def plan_alternatives(
    diagnostics: Sequence[Diagnostic],
    strategy: str = "auto",
    jax_version: str | None = None,
    *,
    texts: Mapping[str, bytes] | None = None,
    reports: Iterable[Report] = (),
    places: Mapping[str, Callable[[int], str]] | None = None,
) -> list[tuple[str, list[FixPlan]]]:
    """(strategy, plans) for the configured strategy, then for each other explicit one: the
    fixes a finding can get, the one ``--fix`` applies first."""
    reports = list(reports)
    order = [strategy, *(s for s in FIX_STRATEGIES if s != strategy)]
    return [(s, plan_fixes(diagnostics, s, jax_version, texts=texts, reports=reports, places=places)) for s in order]


def fix_options(
    alternatives: Sequence[tuple[str, Sequence[FixPlan]]], diagnostics: Iterable[Diagnostic]
) -> list[Diagnostic]:
    """The diagnostics with their ``fixes`` replaced by what the plans can apply: one option
    per plan that fixes it (the configured strategy's first, then another strategy's that
    edits differently, titled with the flag that picks it), each titled with where the edit
    goes; a diagnostic no plan fixes keeps only its advice (the rule's display-only remedies,
    and why no edit is possible)."""
    out = []
    for d in diagnostics:
        if d.code not in FIXABLE_CODES:
            out.append(d)
            continue
        options: list[FixOption] = []
        seen: list[tuple[Edit, ...]] = []
        for index, (strategy, plans) in enumerate(alternatives):
            for plan in plans:
                if d in plan.covered and plan.edits and plan.edits not in seen:
                    seen.append(plan.edits)
                    flag = f" (with --strategy {strategy})" if index else ""
                    options.append(FixOption(plan.strategy, plan.title + flag, plan.rationale, plan.safety))
        if not options:
            options = [f for f in d.fixes if f.safety == "display-only"]
            problems = [
                p for _, plans in alternatives[:1] for plan in plans if d in plan.diagnostics for p in plan.problems
            ]
            if problems:
                options.insert(
                    0, FixOption("device", "No edit can be made", "; ".join(dict.fromkeys(problems)), "display-only")
                )
        out.append(replace(d, fixes=tuple(options)))
    return out


# ---------------------------------------------------------------------------------------
# Strategy
def choose_strategy(
    origin: Origin | None, requested: str, spelling: jax_compat.Spelling, computed_on: bool = False
) -> tuple[str, str]:
    """(strategy, why) for a root cause. ``computed_on``: the host value goes through host
    compute before it is returned (host-compute steps, OFL1201/OFL1206)."""
    del spelling  # every version takes the same rule (see the README)
    kind = origin.kind if origin is not None else None
    if kind == "host_argument" and computed_on and requested != "device":
        return "device", RATIONALE["host_argument"][1] + ("" if requested == "auto" else f"; {STREAMED_HOST_NOTE}")
    if requested != "auto":
        return requested, f"strategy {requested} was requested"
    if kind == "host_argument":
        return "host", STREAMED_PASS_THROUGH_RATIONALE
    if kind == "move_to_host" and computed_on:
        return "device", COMPUTED_ON_RATIONALE
    return RATIONALE.get(kind, RATIONALE[None])


# ---------------------------------------------------------------------------------------
# Groups, parts, attempts
@dataclass(frozen=True)
class _Attempt:
    strategy: str
    codemod: type[FixCommand]
    target: FixTarget
    covers: frozenset[str] = frozenset()
    """The codes of the group's diagnostics this edit fixes."""


@dataclass
class _Part:
    """One edit of a plan and the ways to make it, best first."""

    name: str
    attempts: list[_Attempt]
    doubt: str = ""
    """Why the plan is unsafe even where this edit can be made (a source check that cannot tell
    whether an output is the state)."""


@dataclass
class _Group:
    diagnostics: list[Diagnostic]
    strategy: str
    rationale: str
    target: FixTarget
    parts: list[_Part]
    source: _Source | None
    base: dict[str, Any]

    @classmethod
    def prepare(
        cls,
        group: list[Diagnostic],
        requested: str,
        spelling: jax_compat.Spelling,
        sources: _Sources,
        outputs: Mapping[Diagnostic, tuple[OutputInfo, ...]],
    ) -> _Group:
        first = group[0]
        origin = next((d.origin for d in group if d.origin is not None), None)
        path = source_path(first)
        computed_on = _computed_on(group)
        strategy, rationale = choose_strategy(origin, requested, spelling, computed_on)
        notes = (NONE_LEAF_NOTE.format(version=spelling.version),) if not spelling.none_leaf_inherits_host else ()
        source = sources.get(path) if path else None
        sha = next((d.source_sha256 for d in group if d.source_sha256), None) or (source.sha256 if source else None)
        tree = next((outputs[d] for d in group if outputs.get(d)), ())
        base = {
            "path": path or "",
            "rationale": rationale,
            "origin_key": origin_key(first),
            "diagnostics": tuple(group),
            "source_sha256": sha,
            "notes": notes,
        }
        target = _target(group, path, spelling, source, tree)
        parts = [
            part
            for part in _parts(group, origin, target, strategy, requested, spelling, computed_on, source, tree)
            if part.attempts
        ]
        return cls(group, strategy, rationale, target, parts, source, base)

    def plan(self, spelling: jax_compat.Spelling, place: Callable[[int], str]) -> FixPlan:
        source, base = self.source, self.base
        if source is None or source.error is not None or not self.parts:
            problem = (
                source.error
                if source is not None and source.error
                else "the diagnostic names no source file"
                if source is None
                else "no edit fixes these findings"
            )
            return self._display_only((problem,), place)
        jobs: list[Job] = []
        edits: list[Edit] = []
        problems: list[str] = []
        titles: list[str] = []
        covered: set[str] = set()
        strategies: list[str] = []
        fell_back: list[str] = []
        left_out: list[str] = []
        doubts: list[str] = []
        for part in self.parts:
            failed: list[str] = []
            if part.doubt:
                doubts.append(part.doubt)
            for attempt in part.attempts:
                run = source.dry_run(attempt.codemod, attempt.target)
                if run.edits or (run.satisfied and not run.problems):
                    jobs.append((attempt.codemod, attempt.target))
                    edits.extend(run.edits)
                    problems.extend(run.problems)
                    titles.append(_title(part.name, attempt, run, place))
                    covered |= attempt.covers
                    strategies.append(attempt.strategy)
                    if failed:
                        fell_back.extend(failed)
                    break
                failed.extend(run.problems)
            else:
                problems.extend(failed)
                left_out.append(f"{PART_WORDS.get(part.name, part.name)} ({'; '.join(dict.fromkeys(failed))})")
                if part.name == "state":
                    doubts.append(STATE_LEFT_OUT.format(why="; ".join(dict.fromkeys(failed))))
        if not jobs:
            return self._display_only(tuple(dict.fromkeys(problems)), place)
        if doubts:
            # the edits alone would return the host state in device memory
            reason = "; ".join(dict.fromkeys(doubts))
            edits = [replace(e, safety="unsafe", reason=e.reason or reason) for e in edits]
        strategy = self.strategy if self.strategy in strategies else strategies[0]
        rationale = self.rationale
        if fell_back:
            rationale += (
                f"; the first choice is not possible here ({'; '.join(dict.fromkeys(fell_back))}), so another is used"
            )
        if left_out:
            rationale += f"; not done here: {'; '.join(left_out)}"
        safety: Safety = "unsafe" if any(e.safety == "unsafe" for e in edits) else "safe"
        (codemod, target), *more = list(dict.fromkeys(jobs))
        return FixPlan(
            strategy=strategy,  # type: ignore[arg-type]
            codemod=codemod,
            target=target,
            safety=safety,
            title="; ".join(dict.fromkeys(titles)),
            edits=tuple(edits),
            problems=tuple(dict.fromkeys(problems)),
            more_jobs=tuple(more),
            covered=tuple(d for d in self.diagnostics if d.code in covered),
            **{**base, "rationale": rationale},
        )

    def _display_only(self, problems: tuple[str, ...], place: Callable[[int], str]) -> FixPlan:
        first = (
            self.parts[0].attempts[0] if self.parts else _Attempt(self.strategy, _codemod(self.strategy), self.target)
        )
        name = self.parts[0].name if self.parts else ("declare" if self.strategy == "host" else "return")
        return FixPlan(
            strategy=self.strategy,  # type: ignore[arg-type]
            codemod=first.codemod,
            target=first.target,
            safety="display-only",
            title=_title(name, first, None, place),
            problems=problems,
            **self.base,
        )


PART_WORDS = {
    "state": "keeping the returned state host memory",
    "declare": "declaring the output host memory",
    "pin": "spelling 'pinned_host'",
    "move": "moving the value to device",
    "operand": "moving the operand to device",
}
"""What a part of a plan does, for a rationale that says which part could not be made."""

STATE_UNDECIDED = (
    "cannot tell statically whether {outputs} is the updated host state or a new device value; "
    "`offload-fixer run --fix` sees the types"
)
STATE_LEFT_OUT = (
    "the returned host state cannot be declared host memory ({why}); the rest of the fix alone would "
    "return it in device memory"
)
MOVE_COVERS = frozenset({HOST_VALUE_DEVICE_OUTPUT, *HOST_COMPUTE_CODES})
"""A move to device before the computation fixes the host compute and the output it reaches."""


def _parts(
    group: list[Diagnostic],
    origin: Origin | None,
    target: FixTarget,
    strategy: str,
    requested: str,
    spelling: jax_compat.Spelling,
    computed_on: bool,
    source: _Source | None,
    tree: tuple[OutputInfo, ...] = (),
) -> list[_Part]:
    """The edits a group needs, each with its attempts in order of preference; ``auto`` falls
    back to the other strategy, an explicit request does not."""
    codes = {d.code for d in group}
    kind = origin.kind if origin is not None else None
    outs = HOST_VALUE_DEVICE_OUTPUT in codes
    auto = requested == "auto"

    def at(strategy: str, codemod: type[FixCommand], placement: str, covers: Iterable[str], **changes: Any) -> _Attempt:
        return _Attempt(
            strategy,
            codemod,
            replace(target, placement=placement, **changes),  # type: ignore[arg-type]
            frozenset(covers),
        )

    declare = [at("host", HostOutputCommand, "out_shardings", {HOST_VALUE_DEVICE_OUTPUT})] if outs else []
    at_returns = [at("device", MoveToDeviceCommand, "return", {HOST_VALUE_DEVICE_OUTPUT})] if outs else []
    if kind == "host_argument":
        entry = [at("device", MoveToDeviceCommand, "entry", MOVE_COVERS)] if target.parameter else []
        if strategy == "host":
            return [_Part("declare", declare + (entry + at_returns if auto else []))]
        state, undecided = _state_outputs(group, target, source, tree) if requested != "device" else ((), ())
        doubt = (
            STATE_UNDECIDED.format(outputs=", ".join(f"output {p}" if p else "the result" for p in undecided))
            if undecided
            else ""
        )
        parts: list[_Part] = [_Part("move", entry + at_returns + (declare if auto else []), doubt)]
        if state:
            parts.append(_Part("state", [at("host", HostOutputCommand, "out_shardings", (), output_paths=state)]))
        return parts
    if kind is None and codes == {UNPINNED_HOST_MEMORY}:
        return [_Part("pin", [at("host", PinHostMemoryCommand, "pin_memory", {UNPINNED_HOST_MEMORY})])]
    unpinned = (
        origin is not None
        and origin.memory_kind == UNPINNED_HOST
        and target.origin_line is not None
        and spelling.regime is not jax_compat.Regime.LEGACY
    )
    pin = (
        [at("host", PinHostMemoryCommand, "pin_memory", {UNPINNED_HOST_MEMORY, HOST_VALUE_DEVICE_OUTPUT})]
        if unpinned
        else []
    )
    operand = (
        [at("device", MoveToDeviceCommand, "operand", MOVE_COVERS)]
        if kind == "move_to_host" and target.compute_spans and target.origin_line is not None
        else []
    )
    after_origin = (
        [at("device", MoveToDeviceCommand, "after_origin", MOVE_COVERS)]
        if computed_on and target.origin_line is not None
        else []
    )
    parts = []
    if UNPINNED_HOST_MEMORY in codes and pin and not (outs and strategy == "host"):
        parts.append(_Part("pin", [at("host", PinHostMemoryCommand, "pin_memory", {UNPINNED_HOST_MEMORY})]))
    if outs and strategy == "host":
        parts.append(_Part("declare", pin + declare + (operand + at_returns + after_origin if auto else [])))
    elif outs:
        parts.append(_Part("move", operand + at_returns + after_origin + (pin + declare if auto else [])))
    elif codes & set(HOST_COMPUTE_CODES) and (operand or after_origin):
        parts.append(_Part("operand", operand + after_origin))
    return parts


def _state_outputs(
    group: list[Diagnostic], target: FixTarget, source: _Source | None, tree: tuple[OutputInfo, ...] = ()
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Outputs that return the streamed argument's host leaves (the state that enters as host)
    and are declared device memory: they are declared host, so the state stays host. Found
    where a return gives back the parameter's name, else by the output tree's structure (the
    one sub-tree with the argument's host leaves), else, for an argument streamed whole into a
    function with a single array output (``ema = update(ema, w)``), that output. An output whose
    tensor type differs from the host leaf's (``relu(x + bias)`` for a streamed ``bias``) is a new
    value, not the state. A source check (no output tree) reads how each output is made
    (:mod:`~offload_fixer.codemods.state_flow`); the second result is the outputs it cannot tell
    the state from a new value for."""
    leaves = [parse_output_path(p) for p in (target.parameter_leaves or ("",))]
    kinds = {parse_output_path(p): k for p, k in target.output_kinds}
    prefixes: list[tuple[PathKey, ...]] = []
    if source is not None and source.outline is not None and target.parameter:
        prefixes = source.returned_at(target, target.parameter)
    offending = {parse_output_path(d.output_path or "") for d in group if d.code == HOST_VALUE_DEVICE_OUTPUT}
    # the output paths: the analysis's tree, else (a source check) what the returns spell
    shown = set(kinds) or (set(source.returned_paths(target)) if source is not None and source.outline else set())
    mirrors: list[tuple[PathKey, ...]] = []
    if shown and all(leaves):
        candidates = {
            keys[: len(keys) - len(leaves[0])] for keys in shown if keys[len(keys) - len(leaves[0]) :] == leaves[0]
        }
        fitting = [q for q in candidates if all((*q, *leaf) in shown for leaf in leaves)]
        mirrors = fitting if len(fitting) == 1 else []
    prefixes = prefixes or mirrors
    if not kinds:
        if source is None or source.outline is None or not target.parameter:
            return (), ()
        # the outputs run would compare types for: where the parameter is returned, where the
        # returns mirror its host leaves' keys, or one array out for the whole argument
        candidates = {(*prefix, *leaf) for prefix in prefixes for leaf in leaves}
        if not prefixes and leaves == [()] and shown == {()}:
            candidates = {()}
        verdicts = source.returned_state(target, sorted(offending, key=repr), leaves, mirrors)
        # elsewhere only what the source shows: the state by a tree.map, an update of a leaf
        kept = tuple(format_output_path(keys) for keys, verdict in verdicts.items() if verdict == "state")
        undecided = tuple(
            format_output_path(keys)
            for keys, verdict in verdicts.items()
            if verdict == "derived" or (keys in candidates and verdict == "unknown")
        )
        return kept, undecided
    if not prefixes and leaves == [()] and list(kinds) == [()]:
        # the whole argument in, one array out: the function returns the state, where the
        # analysis saw the types (below)
        prefixes = [()]
    types = {parse_output_path(info.path): info.value_type for info in tree if info.value_type}
    leaf_types = {
        parse_output_path(split_argument(d.origin.argument)[1]): d.origin.value_type
        for d in group
        if d.origin is not None and d.origin.argument and d.origin.value_type
    }
    state = []
    for prefix in prefixes:
        for leaf in leaves:
            keys = (*prefix, *leaf)
            out_type, in_type = types.get(keys), leaf_types.get(leaf)
            if out_type and in_type and out_type != in_type:
                continue
            kind = kinds.get(keys)
            if kind is not None and kind not in HOST_KINDS:
                state.append(format_output_path(keys))
    return tuple(dict.fromkeys(state)), ()


def _computed_on(group: Sequence[Diagnostic]) -> bool:
    return any(d.code in HOST_COMPUTE_CODES for d in group) or any(
        step.role == Role.HOST_COMPUTE for d in group for step in d.trace
    )


def _codemod(strategy: str, placement: str | None = None) -> type[FixCommand]:
    if placement == "pin_memory":
        return PinHostMemoryCommand
    return HostOutputCommand if strategy == "host" else MoveToDeviceCommand


def _placer(path: str, places: Mapping[str, Callable[[int], str]]) -> Callable[[int], str]:
    """How titles name a line of ``path``: ``line 12``; in a notebook, ``cell 3, line 2``."""
    if path in places:
        return places[path]
    from offload_fixer.notebook import is_notebook

    if not is_notebook(path):
        return lambda line: f"line {line}"
    from offload_fixer.notebook.positions import cell_span

    def in_cell(line: int) -> str:
        span = cell_span(Span(path, line))
        return f"cell {span.cell}, line {span.line}" if span is not None and span.cell is not None else f"line {line}"

    return in_cell


def _title(part: str, attempt: _Attempt, run: _DryRun | None, place: Callable[[int], str]) -> str:
    """What the edit does and where it goes (the line of its first change)."""
    t = attempt.target
    edits = run.edits if run is not None else []
    where = f" ({place(edits[0].line)})" if edits else ""
    function = t.function_name.rsplit(".", 1)[-1] if t.function_name else "the function"
    outputs = ", ".join(f"output {p}" if p else "the result" for p in t.output_paths)
    subjects = ", ".join(dict.fromkeys(e.subject for e in edits if e.subject))
    them = "them" if len({e.subject for e in edits}) > 1 or "," in subjects else "it"
    if t.placement == "pin_memory":
        return f"Use 'pinned_host' instead of 'unpinned_host'{where}, so the value is typed host memory"
    if attempt.codemod is HostOutputCommand:
        if part == "state":
            return f"Keep {subjects or outputs} (the state {function} returns) host memory in out_shardings{where}"
        return f"Declare {subjects or outputs} as {t.spelling.host_kind} memory in out_shardings{where}"
    if t.placement == "entry":
        if not edits or subjects.startswith("argument"):
            return f"Move argument {t.parameter} to device where {function} starts{where}"
        return f"Move {subjects} to device before {function} reads {them}{where}"
    if t.placement == "operand":
        return f"Move {subjects or 'the offloaded value'} back to device where it is computed on{where}"
    if t.placement == "after_origin":
        return f"Move {subjects or 'the offloaded value'} back to device right after it is moved to host{where}"
    return f"Move {subjects or outputs} back to device where {function} returns {them}{where}"


def _target(
    group: list[Diagnostic],
    path: str | None,
    spelling: jax_compat.Spelling,
    source: _Source | None,
    tree: tuple[OutputInfo, ...],
) -> FixTarget:
    first = group[0]
    function = next((d.function for d in group if d.function is not None), None)
    origin = next((d.origin for d in group if d.origin is not None), None)
    origin_span = _in_file(origin.span if origin else None, path)
    if origin is None and first.code == UNPINNED_HOST_MEMORY:
        origin_span = _in_file(first.span, path)  # a policy's destination: the literal itself
    offending = [d for d in group if d.code == HOST_VALUE_DEVICE_OUTPUT]
    return_spans = [_in_file(d.return_span, path) for d in offending]
    function_line = function.line if function is not None and _same_file(function.path, path) else None
    inner_line = origin_span.line if origin_span else next((s.line for s in return_spans if s), None)
    compute = tuple(
        dict.fromkeys(
            (step.span.line, step.span.col)
            for d in group
            for step in d.trace
            if step.role == Role.HOST_COMPUTE and step.span is not None and _same_file(step.span.path, path)
        )
    )
    target = FixTarget(
        function_name=function.name if function is not None else None,
        function_line=function_line,
        inner_line=inner_line,
        output_paths=_output_paths(offending) or ("",),
        return_lines=tuple(sorted({s.line for s in return_spans if s})) if return_spans and all(return_spans) else (),
        origin_line=origin_span.line if origin_span else None,
        origin_col=origin_span.col if origin_span else None,
        compute_spans=compute,
        output_kinds=tuple((info.path, info.memory_kind) for info in tree),
        spelling=SpellingOptions(
            api="memory_space" if spelling.memory_space_api else "sharding",
            device_kind=spelling.device_kind,
            host_kind=spelling.host_kind,
            tree_map=spelling.tree_map,
        ),
    )
    if origin is not None and origin.kind == "host_argument" and source is not None and source.outline is not None:
        parameter = source.host_parameter(target, origin)
        if parameter is not None:
            leaves = sorted(
                {
                    split_argument(d.origin.argument)[1]
                    for d in group
                    if d.origin is not None
                    and d.origin.argument
                    and split_argument(d.origin.argument)[0] == parameter[0]
                }
            )
            target = replace(
                target,
                parameter=parameter[0],
                parameter_path=parameter[1],
                parameter_leaves=tuple(leaves) if all(leaves) else (),
            )
    return target


# ---------------------------------------------------------------------------------------
# Reading diagnostics
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


# ---------------------------------------------------------------------------------------
# Source files: read once, cut into statements once, dry runs against excerpts
@dataclass
class _DryRun:
    edits: list[Edit]
    problems: list[str]
    satisfied: list[str]


@dataclass
class _Source:
    path: str
    sha256: str | None = None
    outline: FileOutline | None = None
    error: str | None = None
    _runs: dict[Job, _DryRun] = field(default_factory=dict, repr=False)

    def prefetch(self, codemod: type[FixCommand], targets: Sequence[FixTarget]) -> None:
        """Dry-run several targets in one pass over the statements they need."""
        assert self.outline is not None
        excerpt = self.outline.excerpt_for(targets)
        run = codemod(
            CodemodContext(filename=self.path),
            targets=targets,
            line_map=excerpt.file_line,
            reference_count=self.outline.reference_count,
        )
        run.transform_module(excerpt.module)
        for target, outcome in zip(targets, run.outcomes):
            if not outcome.deferred:
                self._runs[(codemod, target)] = _DryRun(outcome.edits, outcome.problems, outcome.satisfied)

    def dry_run(self, codemod: type[FixCommand], target: FixTarget) -> _DryRun:
        if (codemod, target) not in self._runs:
            self.prefetch(codemod, [target])
        return self._runs[(codemod, target)]

    def facts(self, target: FixTarget) -> SourceFacts:
        """What the codemods know of the statements ``target`` needs, in file lines."""
        assert self.outline is not None
        excerpt = self.outline.excerpt_for([target])
        wrapper = MetadataWrapper(excerpt.module, unsafe_skip_copy=True)
        return SourceFacts.collect(
            wrapper.module, wrapper.resolve(PositionProvider), excerpt.file_line, self.outline.reference_count
        )

    def function(self, target: FixTarget) -> tuple[SourceFacts, FunctionInfo] | None:
        facts = self.facts(target)
        function = facts.find_function(target.function_name, target.function_line, target.inner_line)
        return (facts, function) if function is not None else None

    def host_parameter(self, target: FixTarget, origin: Origin) -> tuple[str, str] | None:
        """(parameter, pytree path inside it) a host-argument origin names: by its span inside
        the signature, else by its label (``NAME['key']...``), else by its flat index when every
        parameter is a single array."""
        found = self.function(target)
        if found is None:
            return None
        facts, function = found
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
            name, path = split_argument(origin.argument)
            if name in names:
                return name, path
        index = origin.argument_index
        if index is not None and len(names) == len(function.positional_params) > index:
            return function.positional_params[index], ""
        return None

    def returned_paths(self, target: FixTarget) -> list[tuple[PathKey, ...]]:
        """Pytree paths every return of the function spells out (literals, through local names),
        for a source check, which has no output tree."""
        found = self.function(target)
        if found is None:
            return []
        facts, function = found
        per_return = [set(literal_paths(facts, function.scope, value)) for _, value in returned_values(function, ())]
        return sorted(set.intersection(*per_return), key=repr) if per_return else []

    def returned_state(
        self,
        target: FixTarget,
        outputs: Sequence[tuple[PathKey, ...]],
        leaves: Sequence[tuple[PathKey, ...]],
        mirrors: Sequence[tuple[PathKey, ...]],
    ) -> dict[tuple[PathKey, ...], str]:
        """For a source check: whether each output gives back the streamed parameter's host
        state (``state``), a new value (``new``), an update of a host leaf that may broadcast
        (``derived``), or the source cannot tell (``unknown``), by every return. An elementwise update with operands of unknown shape is the state where
        the output sits at a ``mirrors`` prefix plus the leaf's own path (the state's keys)."""
        found = self.function(target)
        if found is None or not target.parameter:
            return dict.fromkeys(outputs, "unknown")
        facts, function = found
        flows = StateFlow(facts, target.parameter, leaves)
        verdicts: dict[tuple[PathKey, ...], str] = {}
        for keys in outputs:
            seen = set()
            for _, value in returned_values(function, ()):
                located = locate(facts, function.scope, value, keys)
                flow = flows.at(function.scope, located.node)
                leaf = (*flow.path, *located.rest)
                if flow.kind in ("new", "other") and not located.rest:  # not made by updating the state
                    seen.add("new")
                elif leaf in leaves and (
                    flow.kind == "state" or (flow.kind == "derived" and any(keys == (*m, *leaf) for m in mirrors))
                ):
                    seen.add("state")
                elif leaf and leaf in leaves and flow.kind == "derived" and keys[len(keys) - len(leaf) :] == leaf:
                    seen.add("derived")  # at the leaf's own key (``.velocity``), where the source hides the rest
                else:
                    seen.add("unknown")
            verdicts[keys] = seen.pop() if len(seen) == 1 else "derived" if "derived" in seen else "unknown"
        return verdicts

    def returned_at(self, target: FixTarget, name: str) -> list[tuple[PathKey, ...]]:
        """Pytree paths at which the function's returns give back ``name`` (a parameter,
        perhaps assigned again: ``params = update(params); return params, loss``)."""
        found = self.function(target)
        if found is None:
            return []
        facts, function = found
        paths: list[tuple[PathKey, ...]] = []
        for _, value in returned_values(function, ()):
            for keys in _element_paths(value):
                located = locate(facts, function.scope, value, keys)
                node = located.node
                if not located.rest and isinstance(node, cst.Name) and node.value == name:
                    paths.append(keys)
        return list(dict.fromkeys(paths))


def _origin_order(group: list[Diagnostic]) -> tuple[int, int, str]:
    """Groups by where their origin is written (then its argument label): one order of plans
    whichever engine found them."""
    origin = next((d.origin for d in group if d.origin is not None), None)
    span = origin.span if origin is not None else None
    return (span.line, span.col, origin.argument or "") if span is not None and origin is not None else (1 << 30, 0, "")


def _element_paths(value: cst.BaseExpression, depth: int = 2) -> list[tuple[PathKey, ...]]:
    """The path of ``value`` and of its literal elements, two levels down."""
    paths: list[tuple[PathKey, ...]] = [()]
    if depth and isinstance(value, (cst.Tuple, cst.List)):
        for index, element in enumerate(value.elements):
            paths += [(("index", index), *rest) for rest in _element_paths(element.value, depth - 1)]
    return paths


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
            return _Source(path, sha256_of(data), FileOutline.of(path, decode_source(path, data)))
        except FixError as exc:
            return _Source(path, error=str(exc))
