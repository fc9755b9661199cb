"""Verification: the stage between plan and rewrite that decides which fixes are written.

Every way in asks it: ``run`` (its ``[*]`` marks and the fixable count), ``run --fix`` and
``--diff``, ``fix REPORT``, and, through the record a run leaves, the editor's quick fixes. A
candidate plan holds when the fixed source lowers with the recorded call, the analysis of that
lowering keeps none of the errors the plan claims to remove and meets no new one, and, where the
target's compiler is installed, the compiler compiles it. A plan that does not hold is not
written; the next candidate for its root cause is tried (:mod:`offload_fixer.fixes.candidates`,
:func:`~offload_fixer.verify.choice.choose`); a root cause none of them fixes is left, with the
words of whichever check refused it (the compiler's own, where it was the compiler).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from offload_fixer import codes
from offload_fixer.codemods.eager_to_device import EagerTarget
from offload_fixer.fixes.planner import FixPlan
from offload_fixer.model import Diagnostic
from offload_fixer.verify.choice import Trial

if TYPE_CHECKING:
    from offload_fixer.jax_compat.pod import Pod

EAGER_NOT_VERIFIED = (
    "not verified: an eager operation is compiled only when the program runs it (run the fixed program again)"
)
"""An eager edit has no recorded call to lower it with: JAX's own jit around the operation
is built from the program's live arrays."""


class Verifier:
    """Checks plans against the compilations a run recorded (``reports`` and their ``calls``:
    index -> ``report_file.AbstractCall``) for ``target``. ``require_compiler``: ``--confirm``,
    where the caller has made sure the compiler is installed; without it the compiler judges
    every plan wherever it is installed all the same, so what ``run`` marks ``[*]`` is what
    ``--fix`` writes."""

    def __init__(
        self,
        reports: Sequence[Any],
        calls: Mapping[int, Any],
        target: str,
        require_compiler: bool = False,
        figures: bool = True,
        compile: bool | None = None,
        parts: Collection[str] = (),
        texts: Mapping[str, bytes] | None = None,
        strategy: str = "auto",
        pod: Pod | None = None,
    ) -> None:
        self.reports = list(reports)
        self.calls = dict(calls)
        self.target = target
        self.require_compiler = require_compiler
        self._compile = True if require_compiler else compile
        self.parts = parts
        """The files a checked path is made of where it is a program of several (a kernel's cells)."""
        self.texts = dict(texts or {})
        """The bytes of a program that is no file (a kernel's cells), by its path."""
        self.strategy = strategy
        """The strategy asked for: only ``device`` may return host state in device memory (and
        so undo the offload: its HBM is not held to the program without offload's)."""
        self.pod = pod
        """The pod the run's program saw (``--topology``): a fixed module is imported seeing
        it too (a mesh it builds from ``jax.devices()`` at import is the pod's), and compiled
        for its topology."""
        self.topology = pod.topology if pod is not None else None
        self.figures = figures
        """Whether a compiled fix is measured against the unfixed program (a compile of that one
        too): what ``--fix`` and ``--diff`` say; plain ``run`` only marks ``[*]``."""
        self.notes: list[str] = []
        """What the last :meth:`choose_file` did, one line each."""
        self._before: dict[Any, Any] = {}

    @property
    def compile(self) -> bool:
        """Whether each plan is compiled (and measured, and ranked by the device bytes it holds):
        wherever the target's compiler is installed and starts, unless the caller said otherwise.
        Asked once, when the first plan is checked."""
        if self._compile is None:
            from offload_fixer import xla

            try:
                self._compile = xla.installed(self.target) is not None and xla.oracle(self.target).start() is not None
            except xla.CompilerUnavailable:
                self._compile = False
        return self._compile

    # ------------------------------------------------------------------ choosing
    def choose_file(
        self,
        path: str,
        plans: Sequence[FixPlan],
        unsafe: bool,
        alternatives: Mapping[tuple[str, Any], Sequence[FixPlan]],
    ) -> tuple[Any, list[FixPlan]]:
        """(the file's result with the chosen plans applied in memory, the chosen plans); what
        happened is left in :attr:`notes`, each note one line."""
        from offload_fixer.findings import root_cause_key
        from offload_fixer.fixes import apply_plans
        from offload_fixer.fixes.apply import FileResult, choose_plans
        from offload_fixer.fixes.errors import FixNotConfirmedError
        from offload_fixer.model import byte_size, describe_measurements
        from offload_fixer.verify.choice import choose

        self.notes = []
        chosen, _ = choose_plans(plans, unsafe)
        if not path or not chosen:
            return apply_plans(plans, write=False, unsafe=unsafe, texts=self.texts)[0], []
        options = []
        for plan in chosen:
            others = alternatives.get((plan.path, root_cause_key(plan.diagnostics[0])), ())
            options.append(
                [plan]
                + [
                    dataclasses.replace(other, source_sha256=plan.source_sha256)
                    for other in others
                    if other.edits != plan.edits
                ]
            )
        choice = choose(options, lambda trial: self.check(path, trial), rank=self.compile)
        unchosen = [p for p in plans if p not in chosen]
        ranked = {id(compared[0][0]): compared for compared in choice.ranked}
        for first, instead, why in choice.replaced:
            if id(instead) not in ranked:
                self.notes.append(f"{instead.title}, instead of {first.title} ({why})")
        for compared in choice.ranked:
            figures = ", ".join(f"{plan.title}: HBM {byte_size(held)}" for plan, held in compared[1:])
            self.notes.append(
                f"{compared[0][0].title}: the fewest device bytes ({byte_size(compared[0][1])}) of the "
                f"{len(compared)} candidate plans that compile (against {figures})"
            )
        if not choice.plans:
            reason = choice.left[0][1] if choice.left else "no plan"
            if self.compile:
                reason = f"not confirmed by the compiler: {reason}"
            elif "not verified: " not in reason:  # else the reason says it was not verified
                reason = f"no candidate plan holds: {reason}"
            result = apply_plans(unchosen, write=False, unsafe=unsafe, texts=self.texts)[0] if unchosen else None
            return (
                FileResult(
                    path,
                    "",
                    "",
                    "",
                    # the refused plans too, with why: their findings are not ``[*]`` after this
                    skipped=tuple(result.skipped if result else ()) + tuple(choice.left),
                    error=FixNotConfirmedError(path, reason),
                ),
                [],
            )
        for plan, why in choice.left:
            self.notes.append(f"left unfixed ({plan.title}): {why}")
        result = apply_plans([*choice.plans, *unchosen], write=False, unsafe=unsafe, texts=self.texts)[0]
        result = dataclasses.replace(result, skipped=result.skipped + choice.left)
        trial = choice.trial
        checked = trial.detail[1] if trial is not None and trial.detail else []
        unverified = list(dict.fromkeys(trial.detail[2])) if trial is not None and trial.detail else []
        final = list(choice.plans)
        changes: list[Callable[[FixPlan], FixPlan]] = []
        # some of the file's compilations lowered, others could not: written, never silently
        # (said, and carried by the fix's record)
        if unverified:
            self.notes += unverified
            changes.append(lambda p: dataclasses.replace(p, unverified=unverified[0]))
        if checked:  # claimed: only what the fixed source, analysed again, no longer has
            changes.append(lambda p: claim_only_removed(p, checked))
        checks = [check for _, _, check in checked]
        measured = self.figures and checks and all(c.verdict is not None for c in checks)
        if measured:
            changes.append(lambda p: dataclasses.replace(p, measured=self.measurements(p, checked)))
        for change in changes:
            new = {id(p): change(p) for p in final}
            final = [new[id(p)] for p in final]
            result = dataclasses.replace(result, applied=tuple(new.get(id(p), p) for p in result.applied))
        if measured:
            compiler = checks[0].verdict.compiler
            memory = describe_measurements(m for p in final for m in p.measured)
            count = len(checks)
            self.notes.append(
                f"the fix compiles ({compiler} confirmed {count} compilation{'s' if count != 1 else ''})"
                + (f": {memory}" if memory else "")
            )
        return result, final

    # ------------------------------------------------------------------ one check
    def check(self, path: str, plans: Sequence[FixPlan]) -> Trial:
        """Lower (and compile, where the compiler is installed) ``path`` with ``plans`` applied in
        memory, their edits in other files (the jit site in ``__main__.py``) overlaid too; the
        outputs of the findings they leave unfixed are declared host before compiling.
        ``Trial.detail``: (the file's result, (report, call, check) of each compilation lowered,
        why the others could not be: ``not verified: ...``)."""
        from offload_fixer.fixes import apply_plans
        from offload_fixer.verify.lowering import compile_fixed

        result = apply_plans(plans, write=False, unsafe=True, texts=self.texts)[0]
        if result.error is not None:
            return Trial(False, getattr(result.error, "message", None) or str(result.error))
        if not result.changed:
            return Trial(False, "the edit changes nothing")
        texts = {path: result.new_text}
        originals = {path: result.old_text}
        others = [part for plan in plans for part in plan.in_other_files()]
        for other in apply_plans(others, write=False, unsafe=True, texts=self.texts) if others else []:
            if other.error is None and other.changed and other.path != path:
                texts[other.path] = other.new_text
                originals[other.path] = other.old_text
        # by finding, not by output: two root causes can reach one output
        covered = {_claim(d) for p in plans for d in p.covered}
        checked = []
        for report, call in self._calls(path):
            left = [
                d.output_index
                for d in report.by_code(codes.HOST_VALUE_DEVICE_OUTPUT)
                if d.output_index is not None and _claim(d) not in covered
            ]
            with self.seeing_the_pod():
                check = compile_fixed(
                    texts,
                    report.function,
                    call,
                    self.target,
                    self.compile,
                    left,
                    require_safe=True,
                    originals=originals,
                    parts=self.parts,
                    topology=self.topology,
                )
            checked.append((report, call, check))
        unverified = [check.reason for _, _, check in checked if not check.located]
        if any(isinstance(plan.target, EagerTarget) for plan in plans):
            unverified.append(EAGER_NOT_VERIFIED)
        checked = [entry for entry in checked if entry[2].located]
        checks = [check for _, _, check in checked]
        if not checks and all(isinstance(plan.target, EagerTarget) for plan in plans):
            return Trial(True, detail=(result, [], unverified))
        if not checks:
            # compilations recorded, none lowered: nothing verified, so not written (safe means
            # verified), and plain ``run`` marks it ``fix (not automatic)`` with this reason, as
            # ``--fix`` refuses it
            if unverified:
                return Trial(False, unverified[0])
            if self.require_compiler:
                return Trial(
                    False, "not verified: no checked compilation of this file's functions to compile the fix with"
                )
            # no compilation recorded at all (a report without calls: ``fix`` of a static
            # report): checked from source as ``check --fix`` checks it, written, and said so
            return Trial(
                True,
                detail=(result, [], ["not verified: no checked compilation of this file's functions to lower it with"]),
            )
        failing = next((check for check in checks if not check.lowered), None)
        if failing is not None:
            return Trial(False, failing.reason)
        if self.compile:
            rejected = next((check for check in checks if not check.confirmed), None)
            if rejected is not None:
                return Trial(False, rejected.reason)
        for report, _, check in checked:
            still = still_failing(report, check.found, covered)
            if still is not None:
                return Trial(False, still)
        if self.compile and self.strategy != "device":  # `--strategy device` undoes the offload, as asked
            for report, call, check in checked:
                lost = host_state_lost(report, check) or self.defeats_offload(report, call, check)
                if lost is not None:
                    return Trial(False, lost)
        memories = [check.verdict.memory for check in checks if check.verdict is not None]
        compiled = self.compile
        device = sum(m.device_total for m in memories if m) if compiled and memories and all(memories) else None
        placement = (
            tuple(check.verdict.output_memory_kinds for check in checks if check.verdict is not None)
            if compiled
            else None
        )
        return Trial(
            True,
            compiled=compiled,
            device_bytes=device,
            detail=(result, checked, unverified),
            placement=placement,
        )

    def _calls(self, path: str) -> list[tuple[Any, Any]]:
        """(report, recorded call) of each checked compilation of a function of ``path``; where
        there is none and ``path`` is in a package, of the package's functions (a fixed
        ``optim.py`` reaches ``step.train_step`` through ``from . import optim``)."""
        from offload_fixer.verify.fixed_modules import package_root

        recorded = [
            (report, call)
            for index, report in enumerate(self.reports)
            if (call := self.calls.get(index)) is not None and report.function is not None and report.function.path
        ]
        own = [(r, c) for r, c in recorded if os.path.abspath(r.function.path) == os.path.abspath(path)]
        root = package_root(path)
        if own or root is None:
            return own
        return [(r, c) for r, c in recorded if package_root(r.function.path) == root]

    # ------------------------------------------------------------------ figures
    def measurements(self, plan: FixPlan, checked: Sequence[tuple[Any, Any, Any]]) -> tuple[Any, ...]:
        """The compiler's figures of each compilation of ``plan``'s function(s) in the fixed
        file (``checked``: (report, call, compiled fix) of the file's compilations), each against
        the same compilation unfixed (:meth:`before`)."""
        from offload_fixer.model import HOST_OUTPUTS_BASELINE, FixMeasurement

        functions = {(d.function.name, d.function.path) for d in plan.diagnostics if d.function is not None}
        found = []
        for report, call, check in checked:
            ref = report.function
            after = check.verdict.memory if check.verdict is not None else None
            if after is None or ref is None or (ref.name, ref.path) not in functions:
                continue
            compiler = check.verdict.compiler
            before = self.before(report, call)
            figures, baseline = before if before is not None else (None, HOST_OUTPUTS_BASELINE)
            no_offload = self.no_offload(report, call)
            found.append(
                FixMeasurement(ref.name, self.target, compiler, after, figures, baseline, no_offload, check.moved)
            )
        return tuple(found)

    def no_offload(self, report: Any, call: Any) -> Any:
        """The unfixed compilation's figures with every host memory kind made device memory (the
        program without its offload). Once per compilation."""
        from offload_fixer.verify.lowering import without_offload_memory

        key = ("no offload", id(report))
        if key not in self._before:
            with self.seeing_the_pod():
                self._before[key] = without_offload_memory(report.function, call, self.target, self.topology)
        return self._before[key]

    def defeats_offload(self, report: Any, call: Any, check: Any) -> str | None:
        """Why the compiled fix ``check`` defeats the offload it repairs (``None`` where it does
        not): it keeps state in host memory yet holds more HBM than the same program without
        its offload, so a user who offloaded to fit the model is handed one that needs more
        HBM than not offloading at all (the compiler's ``memory_analysis()``, the bound a chip's
        HBM holds a program to)."""
        from offload_fixer.model import byte_size, defeats_offload

        after = check.verdict.memory if check.verdict is not None else None
        without = self.no_offload(report, call)
        if after is None or without is None or not defeats_offload(after, without):
            return None
        return (
            f"the fixed `{report.function.name}` needs {byte_size(after.device_total)} of HBM "
            f"({check.verdict.compiler}'s memory analysis), more than the same program without its offload "
            f"({byte_size(without.device_total)}): it would defeat the offload it repairs (keep that state on "
            "device, or move it to device a part at a time)"
        )

    def before(self, report: Any, call: Any) -> tuple[Any, str] | None:
        """(the unfixed compilation's figures, their baseline): with its failing outputs
        declared host, from the run's own ``--confirm`` where it compiled so
        (``Report.xla_accepted``: the program is not compiled again), else compiled once here;
        where XLA does not compile that, without its offload
        (:func:`~offload_fixer.verify.lowering.original_memory`). Once per compilation."""
        from offload_fixer.model import HOST_OUTPUTS_BASELINE
        from offload_fixer.verify.lowering import original_memory

        accepted = report.xla_accepted
        if accepted is not None and accepted.outcome == "compiled" and accepted.memory is not None:
            return accepted.memory, HOST_OUTPUTS_BASELINE
        key = id(report)
        if key not in self._before:
            failing = [
                d.output_index for d in report.by_code(codes.HOST_VALUE_DEVICE_OUTPUT) if d.output_index is not None
            ]
            # the run's --confirm compiled it with those outputs declared host, and XLA refused
            declared = accepted is None or accepted.target != self.target
            with self.seeing_the_pod():
                self._before[key] = original_memory(
                    report.function, call, self.target, failing, declared, self.topology
                )
        return self._before[key]

    def seeing_the_pod(self) -> AbstractContextManager[Any]:
        """JAX answering as the run's pod while a fixed module is imported and lowered."""
        if self.pod is None:
            return contextlib.nullcontext()
        from offload_fixer.jax_compat.pod import pod_view

        return pod_view(self.pod)


def host_state_lost(report: Any, check: Any) -> str | None:
    """Why the compiled fix ``check`` does not keep the author's placement (``None`` where it
    does): an output the unfixed program's jit declares host memory comes back in device
    memory. Host state stays host; only ``--strategy device`` returns it in device memory, as
    asked. A host memory kind JAX inferred (``x * 2`` of a host argument, typed host from JAX
    0.7.1) is no placement of the author's: the fix that moves ``x`` to device moves it too."""
    from offload_fixer.model import HOST_KINDS

    kinds = check.verdict.output_memory_kinds if check.verdict is not None else ()
    for output in report.outputs:
        if not output.declared:
            continue
        if output.index < len(kinds) and output.memory_kind in HOST_KINDS and kinds[output.index] not in HOST_KINDS:
            where = output.path or "the result"
            return (
                f"the fixed `{report.function.name}` returns output {where} in {kinds[output.index]} memory, "
                f"where the program keeps it in {output.memory_kind}: host state stays host"
            )
    return None


def _claim(d: Diagnostic) -> tuple[Any, ...]:
    return (d.function, d.output_index, d.message)


def still_failing(report: Any, found: Sequence[Diagnostic], covered: set[tuple[Any, ...]]) -> str | None:
    """Why the fixed lowering, analysed again, still fails (``None`` where it does not): an error
    it finds that is not one of ``report``'s errors the plans leave (``covered``: the plans'
    claims), the same code and origin; that is, an error a plan claims to remove, or a new
    one (a host index the moved buffer is now scattered with on device)."""
    from offload_fixer.verify.lowering import finding_key

    left = {finding_key(d) for d in report.diagnostics if d.severity == "error" and _claim(d) not in covered}
    for d in found:
        if d.severity == "error" and finding_key(d) not in left:
            origin = (d.origin.detail or d.origin.kind) if d.origin is not None else "no origin"
            span = f" at line {d.span.line}" if d.span is not None else ""
            first = d.message.split(": ", 1)[0] if d.code != codes.HOST_VALUE_DEVICE_OUTPUT else d.message
            return (
                f"the fixed `{report.function.name}`, analysed again, still fails: {d.code}{span} ({origin}): {first}"
            )
    return None


def claim_only_removed(plan: FixPlan, checked: Sequence[tuple[Any, Any, Any]]) -> FixPlan:
    """``plan`` covering only the findings the fixed source no longer has: each covered
    finding whose code and origin the analysis of its function's fixed lowering still finds
    (``checked``: (report, call, check) of the file's compilations) is moved to
    ``left_after``. A stack moved slice by slice whose update stays host compute leaves that
    host compute (OFL1201) and what the backward pass still reads from host."""
    from offload_fixer.verify.lowering import finding_key

    def still_there(d: Diagnostic) -> bool:
        return any(
            check.lowered
            and check.located
            and report.function is not None
            and d.function is not None
            and report.function.name == d.function.name
            and finding_key(d) in check.remaining
            for report, _, check in checked
        )

    left = tuple(d for d in plan.covered if still_there(d))
    if not left:
        return plan
    return dataclasses.replace(
        plan, covered=tuple(d for d in plan.covered if d not in left), left_after=plan.left_after + left
    )
