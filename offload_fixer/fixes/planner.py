"""Diagnostics -> fix plans: which file, function, jit site, returns and outputs the codemods
edit, with which strategy, and how safe the edits are.

Diagnostics that share a root cause (``Origin.key``; for a streamed argument, the argument)
become one plan, whatever their codes: the OFL1200 outputs it reaches, the OFL1201/OFL1206
computations on it and its OFL1204 spelling are fixed together. A plan is made of parts (the
move to device, the declaration of host outputs, the respelled memory kind), each tried in
order of preference against the file (a dry run of its codemod), so the plan's edits, its
safety, the diagnostics it fixes and the reasons an edit is not possible are known before
anything is written. See ``README.md`` in this package for the rules and the safety labels.

Its neighbours: the words of a plan (rationale, notes, titles) in ``plan_words``, the
diagnostics read into a target in ``plan_targets``, the source files and dry runs in
``plan_sources``. This module groups the diagnostics, chooses the parts and runs them.

Over 500 lines on purpose: which parts each kind of finding gets (``_parts``, ``_planned``) reads
the group's target and codemods as the group does; its seam, the per-code rules, is the next split.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from offload_fixer import jax_compat
from offload_fixer.codemods.eager_to_device import EagerToDeviceCommand
from offload_fixer.codemods.fix_command import FixCommand
from offload_fixer.codemods.host_output import HostOutputCommand, HostOutputTarget
from offload_fixer.codemods.move_to_device import MoveToDeviceCommand
from offload_fixer.codemods.pin_host_memory import PinHostMemoryCommand
from offload_fixer.codemods.rename_checkpoint_name import RenameCheckpointNameCommand
from offload_fixer.codemods.targets import Edit, FunctionTarget, narrowed
from offload_fixer.codes import (
    HOST_COMPUTE_CODES,
    HOST_VALUE_DEVICE_OUTPUT,
    MIXED_MEMORY_SPACES,
    OFFLOAD_DOES_NOTHING,
    UNPINNED_HOST_MEMORY,
)
from offload_fixer.findings import origin_key, root_cause_key, source_path
from offload_fixer.fixes.plan_sources import Job, Source, Sources, left_on_host
from offload_fixer.fixes.plan_targets import FixTarget, fix_target, host_computed, imported_jit_target, state_outputs
from offload_fixer.fixes.plan_words import (
    NONE_LEAF_NOTE,
    PART_WORDS,
    STATE_LEFT_OUT,
    STATE_UNDECIDED,
    choose_strategy,
    detail,
    joined_titles,
    placer,
    title,
)
from offload_fixer.model import (
    DEVICE,
    STRATEGIES,
    UNPINNED_HOST,
    WORKAROUND,
    Diagnostic,
    FixMeasurement,
    Origin,
    OutputInfo,
    Report,
    Safety,
)

CODEMODS: tuple[type[FixCommand], ...] = (
    MoveToDeviceCommand,
    HostOutputCommand,
    PinHostMemoryCommand,
    RenameCheckpointNameCommand,
    EagerToDeviceCommand,
)
"""Every codemod the planner may choose; each declares its strategy and, per placement, the
codes an edit there fixes (``FixCommand.STRATEGY``, ``FixCommand.FIXES``). A new codemod is
one more entry here."""
CODEMOD_AT: dict[str, type[FixCommand]] = {placement: c for c in CODEMODS for placement in c.FIXES}
"""The codemod that makes each placement."""
FIXABLE_CODES = tuple(sorted({code for c in CODEMODS for codes in c.FIXES.values() for code in codes}))
"""The codes some codemod fixes: the diagnostics the planner plans for."""
_ELSEWHERE = [fixed for c in CODEMODS for p, fixed in c.FIXES.items() if p != "eager"]
EAGER_ONLY_CODES = CODEMOD_AT["eager"].FIXES["eager"] - set().union(*_ELSEWHERE)


@dataclass(frozen=True)
class FixPlan:
    """One fix for one root cause in one file: the codemod jobs and what they will do."""

    path: str
    strategy: Literal["device", "host"]
    codemod: type[FixCommand]
    """What makes the edit: :class:`MoveToDeviceCommand`, :class:`HostOutputCommand` or
    :class:`PinHostMemoryCommand`, held, not named."""
    target: FunctionTarget
    """The codemod's own target (``codemod.TARGET``)."""
    safety: Safety
    title: str
    """What the fix does and where, in one line, for a ``fix (...)`` line or a quick fix."""
    rationale: str
    origin_key: str
    diagnostics: tuple[Diagnostic, ...]
    source_sha256: str | None
    edits: tuple[Edit, ...] = ()
    detail: str = ""
    """What the title leaves out (which outputs a part keeps host memory): the body of the fix."""
    problems: tuple[str, ...] = ()
    """Why the edit (or part of it) cannot be made; a display-only plan lists them."""
    notes: tuple[str, ...] = ()
    more_jobs: tuple[Job, ...] = ()
    """Further (codemod, target) edits of the same fix (a streamed argument moved to device
    and the state it becomes declared host, say)."""
    covered: tuple[Diagnostic, ...] = ()
    """The diagnostics these edits fix (a display-only plan fixes none)."""
    measured: tuple[FixMeasurement, ...] = ()
    """The compiler's memory figures of the fixed program against the unfixed one, one per
    compilation of the fixed function, once the fix is compiled; empty until then, and where
    no compiler is installed."""
    unverified: str = ""
    """``not verified: <why>`` where the fixed source could not be lowered before it was
    written (a jit only the running program builds, an import that runs it); else empty."""
    left_after: tuple[Diagnostic, ...] = ()
    """Findings the edits were expected to fix (taken out of :attr:`covered`) that the analysis
    of the fixed source, lowered again before writing, still makes: the plan claims only what
    it removes."""
    elsewhere: tuple[tuple[str, str | None, Job], ...] = ()
    """(file, its sha256, edit) for the edits of the same fix in another file: the jit site of
    a function defined here, in the package's ``__main__.py`` (applied with the plan, always)."""

    def in_other_files(self) -> list[FixPlan]:
        """The plan's edits in other files, each as a plan of that file with the same label."""
        cleared: dict[str, Any] = {"more_jobs": (), "elsewhere": (), "covered": ()}
        return [
            replace(self, path=path, source_sha256=sha, codemod=codemod, target=target, **cleared)
            for path, sha, (codemod, target) in self.elsewhere
        ]

    @property
    def jobs(self) -> tuple[Job, ...]:
        """Every (codemod, target) the fix runs, the main one first."""
        return ((self.codemod, self.target), *self.more_jobs)

    @property
    def output_paths(self) -> tuple[str, ...]:
        return next((t.output_paths for _, t in self.jobs if isinstance(t, HostOutputTarget)), ("",))

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
    narrow: bool = True,
    sources: Sources | None = None,
) -> list[FixPlan]:
    """Plans for the fixable diagnostics of a report (object or its JSON dict), of several
    reports, or of a list of diagnostics.

    ``strategy``: ``device`` (move back to device), ``host`` (declare host outputs),
    ``auto`` (per origin; see the package README) or ``workaround`` (``auto``, and also the
    findings that are known bugs of the released compiler, which the others leave to an
    upgrade). ``jax_version`` picks the spelling;
    default: the report's version, else the installed one. ``texts``: file contents to
    plan against instead of the files on disk (an editor's unsaved buffer), by path.
    ``reports``: where plain diagnostics come from, for the output tree of each function
    (``Report.outputs``), which host-output fixes mirror. ``places``: how titles name a line
    of a file whose lines are not the user's (a program of notebook cells: ``In [5], line 3``);
    a notebook's lines are named by its cells without it. ``narrow=False``: a scanned stack is
    moved whole where the function starts, not slice by slice (``FixTarget.narrow``).
    ``sources``: the files as read for an earlier plan of the same findings (built from the
    same ``texts``): their parses, facts and codemod dry runs are kept, so planning the
    candidate strategies one after another reads and parses each file once.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; expected {', '.join(STRATEGIES)}")
    workaround = strategy == WORKAROUND
    if workaround:
        strategy = "auto"
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
    sources = Sources(texts or {}) if sources is None else sources
    groups: dict[tuple[Any, ...], list[Diagnostic]] = {}
    for diagnostic in items:
        if _planned(diagnostic, workaround):
            groups.setdefault(root_cause_key(diagnostic), []).append(diagnostic)
    ordered = sorted(groups.values(), key=_origin_order)  # run and check list findings in different orders
    prepared = [_Group.prepare(group, strategy, spelling, sources, outputs, narrow) for group in ordered]
    first_attempts: dict[tuple[str, type[FixCommand]], list[FunctionTarget]] = {}
    for group in prepared:
        if group.source is not None and group.source.outline is not None:
            for part in group.parts:
                attempt = part.attempts[0]
                first_attempts.setdefault((group.source.path, attempt.codemod), []).append(attempt.target)
    for (path, codemod), targets in first_attempts.items():
        sources.get(path).prefetch(codemod, list(dict.fromkeys(targets)))
    return [group.plan(spelling, placer(group.base["path"], places or {})) for group in prepared]


# ---------------------------------------------------------------------------------------
# Groups, parts, attempts
@dataclass(frozen=True)
class _Attempt:
    strategy: str
    codemod: type[FixCommand]
    target: FunctionTarget
    covers: frozenset[str] = frozenset()
    """The codes of the group's diagnostics this edit fixes."""
    path: str | None = None
    """The file it edits, when not the group's (the function's jit site in another module)."""


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
    source: Source | None
    base: dict[str, Any]
    sources: Sources | None = None

    @classmethod
    def prepare(
        cls,
        group: list[Diagnostic],
        requested: str,
        spelling: jax_compat.Spelling,
        sources: Sources,
        outputs: Mapping[Diagnostic, tuple[OutputInfo, ...]],
        narrow: bool = True,
    ) -> _Group:
        first = group[0]
        origin = next((d.origin for d in group if d.origin is not None), None)
        path = source_path(first)
        computed_on = host_computed(group)
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
        target = replace(fix_target(group, path, spelling, source, tree), narrow=narrow)
        parts = [
            part
            for part in _parts(group, origin, target, strategy, requested, spelling, computed_on, source, tree)
            if part.attempts
        ]
        for part in parts:
            first_try = part.attempts[0]
            elsewhere = imported_jit_target(group, target, source, first_try.codemod) if part.name == "state" else None
            if elsewhere is not None:  # the function's jit site in another module
                part.attempts.append(replace(first_try, target=elsewhere[1], path=elsewhere[0]))
        return cls(group, strategy, rationale, target, parts, source, base, sources)

    def plan(self, spelling: jax_compat.Spelling, place: Callable[[int], str]) -> FixPlan:
        source, base = self.source, self.base
        if source is not None and (asserted := source.asserted_error(self.diagnostics)) is not None:
            return self._display_only((asserted,), place)
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
        details: list[str] = []
        covered: set[str] = set()
        strategies: list[str] = []
        fell_back: list[str] = []
        left_out: list[str] = []
        doubts: list[str] = []
        elsewhere: list[tuple[str, str | None, Job]] = []
        for part in self.parts:
            failed: list[str] = []
            if part.doubt:
                doubts.append(part.doubt)
            for attempt in part.attempts:
                other = self.sources.get(attempt.path) if attempt.path and self.sources is not None else None
                if other is not None and (other.error is not None or other.outline is None):
                    failed.append(other.error or f"{attempt.path} cannot be read")
                    continue
                run = (other or source).dry_run(attempt.codemod, attempt.target)
                if run.edits or (run.satisfied and not run.problems):
                    if other is not None:
                        if run.edits:
                            elsewhere.append((other.path, other.sha256, (attempt.codemod, attempt.target)))
                    else:
                        jobs.append((attempt.codemod, attempt.target))
                    edits.extend(run.edits)
                    problems.extend(run.problems)
                    named = (
                        place if other is None else (lambda line, p=other.path: f"{os.path.basename(p)}, line {line}")
                    )
                    titles.append(title(part.name, attempt.target, run.edits, named))
                    details.append(detail(part.name, attempt.target, run.edits))
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
            title=joined_titles(titles),
            detail="; ".join(dict.fromkeys(d for d in details if d)),
            edits=tuple(edits),
            problems=tuple(dict.fromkeys(problems)),
            more_jobs=tuple(more),
            covered=tuple(d for d in self.diagnostics if d.code in covered and not left_on_host(d, edits, source.path)),
            elsewhere=tuple(elsewhere),
            **{**base, "rationale": rationale},
        )

    def _display_only(self, problems: tuple[str, ...], place: Callable[[int], str]) -> FixPlan:
        fallback = _codemod(self.strategy)
        first = (
            self.parts[0].attempts[0]
            if self.parts
            else _Attempt(self.strategy, fallback, narrowed(fallback.TARGET, self.target))
        )
        name = self.parts[0].name if self.parts else ("declare" if self.strategy == "host" else "return")
        return FixPlan(
            strategy=self.strategy,  # type: ignore[arg-type]
            codemod=first.codemod,
            target=first.target,
            safety="display-only",
            title=title(name, first.target, [], place),
            problems=problems,
            **self.base,
        )


def _parts(
    group: list[Diagnostic],
    origin: Origin | None,
    target: FixTarget,
    strategy: str,
    requested: str,
    spelling: jax_compat.Spelling,
    computed_on: bool,
    source: Source | None,
    tree: tuple[OutputInfo, ...] = (),
) -> list[_Part]:
    """The edits a group needs, each with its attempts in order of preference; ``auto`` falls
    back to the other strategy, an explicit request does not."""
    codes = {d.code for d in group}
    kind = origin.kind if origin is not None else None
    outs = HOST_VALUE_DEVICE_OUTPUT in codes
    auto = requested == "auto"

    def at(placement: str, covers: Iterable[str] | None = None, **changes: Any) -> _Attempt:
        """The edit at ``placement``, by the codemod that declares it; it fixes the codes the
        codemod declares there unless ``covers`` says otherwise."""
        codemod = CODEMOD_AT[placement]
        return _Attempt(
            codemod.STRATEGY,
            codemod,
            narrowed(codemod.TARGET, target, placement=placement, **changes),
            frozenset(codemod.FIXES[placement] if covers is None else covers),  # type: ignore[index]
        )

    if target.eager_line is not None:  # JAX's own jit around the user's eager line
        return [_Part("eager", [at("eager")])]
    declare = [at("out_shardings")] if outs else []
    at_returns = [at("return")] if outs else []
    if kind == "host_argument":
        entry = [at("entry")] if target.parameter else []
        if strategy == "host":
            return [_Part("declare", declare + (entry + at_returns if auto else []))]
        state, undecided = state_outputs(group, target, source, tree) if requested != "device" else ((), ())
        doubt = (
            STATE_UNDECIDED.format(outputs=", ".join(f"output {p}" if p else "the result" for p in undecided))
            if undecided
            else ""
        )
        parts: list[_Part] = [_Part("move", entry + at_returns + (declare if auto else []), doubt)]
        if state:
            parts.append(_Part("state", [at("out_shardings", (), output_paths=state)]))
        return parts
    if kind is None and codes == {UNPINNED_HOST_MEMORY}:
        return [_Part("pin", [at("pin_memory")])]
    if codes == {OFFLOAD_DOES_NOTHING} and _device_destination(origin):
        return [_Part("destination", [at("pin_memory", {OFFLOAD_DOES_NOTHING})])]
    if kind is None and codes == {OFFLOAD_DOES_NOTHING}:
        return [_Part("rename", [at("rename_name")])]
    unpinned = (
        origin is not None
        and origin.memory_kind == UNPINNED_HOST
        and target.origin_line is not None
        and spelling.regime is not jax_compat.Regime.LEGACY
    )
    pin = [at("pin_memory", {UNPINNED_HOST_MEMORY, HOST_VALUE_DEVICE_OUTPUT})] if unpinned else []
    operand = (
        [at("operand")] if kind == "move_to_host" and target.compute_spans and target.origin_line is not None else []
    )
    after_origin = [at("after_origin")] if computed_on and target.origin_line is not None else []
    parts = []
    if UNPINNED_HOST_MEMORY in codes and pin and not (outs and strategy == "host"):
        parts.append(_Part("pin", [at("pin_memory")]))
    if outs and strategy == "host":
        parts.append(_Part("declare", pin + declare + (operand + at_returns + after_origin if auto else [])))
    elif outs:
        parts.append(_Part("move", operand + at_returns + after_origin + (pin + declare if auto else [])))
    elif codes & set(HOST_COMPUTE_CODES) and (operand or after_origin):
        parts.append(_Part("operand", operand + after_origin))
    return parts


def _planned(diagnostic: Diagnostic, workaround: bool) -> bool:
    """Whether a finding gets a plan: its code is one a codemod fixes, it is no known compiler
    bug (unless the workaround is asked for), for OFL1211 it is the source check's misspelt
    name (its literal is the span) or a policy whose destination is device memory (respelled
    ``pinned_host``; what else ``run`` finds of OFL1211 is advice), for OFL1215 a
    committed host argument JAX refused (a value the program moves to host itself is moved
    back where the program means it on device: advice), and OFL1208 only in eager code."""
    if diagnostic.code not in FIXABLE_CODES or (diagnostic.compiler_bug is not None and not workaround):
        return False
    if diagnostic.code in EAGER_ONLY_CODES and not (diagnostic.function and diagnostic.function.eager):
        return False
    if diagnostic.code == MIXED_MEMORY_SPACES:
        return diagnostic.origin is not None and diagnostic.origin.kind == "host_argument"
    return (
        diagnostic.code != OFFLOAD_DOES_NOTHING or diagnostic.origin is None or _device_destination(diagnostic.origin)
    )


def _device_destination(origin: Origin | None) -> bool:
    """An offload policy whose destination is device memory (OFL1211): its literal is respelled."""
    return origin is not None and origin.kind == "offload_policy" and origin.memory_kind == DEVICE


def _codemod(strategy: str) -> type[FixCommand]:
    """The first codemod of ``strategy``: what a display-only plan names."""
    return next(c for c in CODEMODS if strategy == c.STRATEGY)


def _origin_order(group: list[Diagnostic]) -> tuple[int, int, str]:
    """Groups by where their origin is written (then its argument label): one order of plans
    whichever engine found them."""
    origin = next((d.origin for d in group if d.origin is not None), None)
    span = origin.span if origin is not None else None
    return (span.line, span.col, origin.argument or "") if span is not None and origin is not None else (1 << 30, 0, "")
