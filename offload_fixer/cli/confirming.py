"""``--confirm`` and the fix check: each fixed file's functions lowered again from the fixed
text before it is written, compiled where the compiler is installed, and the compiler's
verdicts on the run said in its own words."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from offload_fixer import codes
from offload_fixer.cli.options import Console, Invocation, Outcome, fail
from offload_fixer.exit_codes import ExitCode

if TYPE_CHECKING:
    from offload_fixer.jax_compat.pod import Pod


class FixConfirmation:
    """Each fixed file's checked functions lowered again from the fixed text before anything
    is written, and compiled where the compiler is installed (a requirement with ``--confirm``,
    ``compile``) to measure it (:mod:`offload_fixer.xla.confirm_fixes`). A plan that fails is
    not written: the next candidate for its root cause is tried (:mod:`offload_fixer.fixes.candidates`)."""

    def __init__(
        self,
        reports: Sequence[Any],
        calls: dict[int, Any],
        target: str,
        compile: bool = True,
        measure: bool | None = None,
        pod: Pod | None = None,
    ) -> None:
        from offload_fixer.xla import compilers

        self.reports = list(reports)
        self.calls = calls
        self.target = target
        self.pod = pod
        """The pod the run's program saw (``--topology``): a fixed module is imported seeing
        it too (a mesh it builds from ``jax.devices()`` at import is the pod's), and compiled
        for its topology."""
        self.topology = pod.topology if pod is not None else None
        self.compile = compile
        self.measure = compile or (compilers.installed(target) is not None if measure is None else measure)
        """Compile to measure even without ``--confirm``, where the compiler is installed
        (``measure`` False: lower only, as plain ``run`` checks the fixes it marks ``[*]``)."""
        self._before: dict[int, Any] = {}

    def apply(
        self,
        plans: Sequence[Any],
        invocation: Invocation,
        console: Console,
        alternatives: Mapping[tuple[str, Any], Sequence[Any]] | None = None,
        scope: Any = None,
    ) -> list[Any]:
        """``plans`` checked file by file, each failing one replaced by the next of its
        ``alternatives`` (per (file, root cause), from ``candidate_plans``), then written where
        ``scope`` (a :class:`~offload_fixer.fixes.scope.WriteScope`) lets them be."""
        from offload_fixer.fixes import apply_plans
        from offload_fixer.report import display_path

        by_path: dict[str, list[Any]] = {}
        for plan in plans:
            by_path.setdefault(plan.path, []).append(plan)
        results = []
        confirmed: dict[str, list[Any]] = {}
        for path, file_plans in by_path.items():
            result, chosen = self.choose_file(path, file_plans, invocation.unsafe_fixes, alternatives or {})
            for line in self.notes:
                console.note(f"offload-fixer: {display_path(path)}: {line}", always=line.startswith("left unfixed"))
            results.append(result)
            if chosen:
                confirmed[path] = chosen
        # the chosen plans' edits in other files (a jit site in the package's __main__.py)
        others = [part for chosen in confirmed.values() for plan in chosen for part in plan.in_other_files()]
        if others:
            results += [r for r in apply_plans(others, write=False, unsafe=True) if r.path not in by_path]
        if invocation.write and confirmed:
            written = {
                r.path: r
                for r in apply_plans(
                    [p for chosen in confirmed.values() for p in chosen],
                    write=True,
                    unsafe=invocation.unsafe_fixes,
                    scope=scope,
                )
            }
            results = [
                dataclasses.replace(written[r.path], skipped=r.skipped) if r.path in written else r for r in results
            ]
            results += [r for path, r in written.items() if path not in {x.path for x in results}]
        return results

    def choose_file(
        self, path: str, plans: Sequence[Any], unsafe: bool, alternatives: Mapping[tuple[str, Any], Sequence[Any]]
    ) -> tuple[Any, list[Any]]:
        """(the file's result with the chosen plans applied in memory, the chosen plans); what
        happened is left in :attr:`notes`, each note one line."""
        from offload_fixer.findings import root_cause_key
        from offload_fixer.fixes import apply_plans
        from offload_fixer.fixes.apply import choose_plans
        from offload_fixer.fixes.candidates import choose
        from offload_fixer.fixes.errors import FixNotConfirmedError

        self.notes: list[str] = []
        chosen, _ = choose_plans(plans, unsafe)
        if not path or not chosen:
            return apply_plans(plans, write=False, unsafe=unsafe)[0], []
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
        choice = choose(options, lambda trial: self.check(path, trial), measure=self.measure, rank=self.compile)
        unchosen = [p for p in plans if p not in chosen]
        ranked = {id(compared[0][0]): compared for compared in choice.ranked}
        for first, instead, why in choice.replaced:
            if id(instead) not in ranked:
                self.notes.append(f"{instead.title}, instead of {first.title} ({why})")
        for compared in choice.ranked:
            from offload_fixer.model import byte_size

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
                reason = f"no candidate plan lowers: {reason}"
            result = apply_plans(unchosen, write=False, unsafe=unsafe)[0] if unchosen else None
            from offload_fixer.fixes.apply import FileResult

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
        result = apply_plans([*choice.plans, *unchosen], write=False, unsafe=unsafe)[0]
        result = dataclasses.replace(result, skipped=result.skipped + choice.left)
        trial = choice.trial
        checked = trial.detail[1] if trial is not None and trial.detail else []
        unverified = list(dict.fromkeys(trial.detail[2])) if trial is not None and trial.detail else []
        # some of the file's compilations lowered, others could not: written, never silently
        # (said, and carried by the fix's record)
        if unverified:
            self.notes += unverified
            marked = {id(p): dataclasses.replace(p, unverified=unverified[0]) for p in choice.plans}
            choice = dataclasses.replace(choice, plans=tuple(marked[id(p)] for p in choice.plans))
            result = dataclasses.replace(result, applied=tuple(marked.get(id(p), p) for p in result.applied))
        if checked:  # claimed: only what the fixed source, analysed again, no longer has
            trimmed = {id(p): claim_only_removed(p, checked) for p in choice.plans}
            choice = dataclasses.replace(choice, plans=tuple(trimmed[id(p)] for p in choice.plans))
            result = dataclasses.replace(result, applied=tuple(trimmed.get(id(p), p) for p in result.applied))
        checks = [check for _, _, check in checked]
        if checks and all(c.verdict is not None for c in checks):
            compiler = checks[0].verdict.compiler
            compiled = trial is not None and trial.compiled
            how = (
                f"the fix compiles ({compiler} confirmed {len(checks)} compilation{'s' if len(checks) != 1 else ''})"
                if compiled
                else f"the fix lowers; {compiler} does not compile it ({checks[0].reason})"
            )
            chosen = list(choice.plans)
            if compiled:  # the plans written carry their figures, as the result shown does
                measured = {id(p): dataclasses.replace(p, measured=self.measurements(p, checked)) for p in chosen}
                chosen = [measured[id(p)] for p in chosen]
                result = dataclasses.replace(result, applied=tuple(measured.get(id(p), p) for p in result.applied))
            from offload_fixer.model import describe_measurements

            memory = describe_measurements(m for p in chosen for m in p.measured)
            self.notes.append(how + (f": {memory}" if memory else ""))
            return result, chosen
        return result, list(choice.plans)

    def check(self, path: str, plans: Sequence[Any]) -> Any:
        """Lower (and compile, to measure) ``path`` with ``plans`` applied in memory, their
        edits in other files (the jit site in ``__main__.py``) overlaid too; the outputs of the
        findings they leave unfixed are declared host before compiling. ``Trial.detail``: (the
        file's result, (report, call, check) of each compilation lowered, why the others could
        not be: ``not verified: ...``)."""
        from offload_fixer.fixes import apply_plans
        from offload_fixer.fixes.candidates import Trial
        from offload_fixer.xla.confirm_fixes import compile_fixed

        result = apply_plans(plans, write=False, unsafe=True)[0]
        if result.error is not None:
            return Trial(False, getattr(result.error, "message", None) or str(result.error))
        if not result.changed:
            return Trial(False, "the edit changes nothing")
        texts = {path: result.new_text}
        others = [part for plan in plans for part in plan.in_other_files()]
        for other in apply_plans(others, write=False, unsafe=True) if others else []:
            if other.error is None and other.changed and other.path != path:
                texts[other.path] = other.new_text
        # by finding, not by output: two root causes can reach one output
        covered = {(d.function, d.output_index, d.message) for p in plans for d in p.covered}
        checked = []
        for report, call in self._calls(path):
            left = [
                d.output_index
                for d in report.by_code(codes.HOST_VALUE_DEVICE_OUTPUT)
                if d.output_index is not None and (d.function, d.output_index, d.message) not in covered
            ]
            with self.seeing_the_pod():
                check = compile_fixed(
                    texts,
                    report.function,
                    call,
                    self.target,
                    self.measure,
                    left,
                    require_safe=not self.compile,
                    topology=self.topology,
                )
            checked.append((report, call, check))
        unverified = [check.reason for _, _, check in checked if not check.located]
        if not self.compile:
            checked = [entry for entry in checked if entry[2].located]
        checks = [check for _, _, check in checked]
        if not checks:
            # compilations recorded, none lowered: nothing verified, so not written (safe means
            # verified), and plain ``run`` marks it ``fix (not automatic)`` with this reason, as
            # ``--fix`` refuses it
            if unverified:
                return Trial(False, unverified[0])
            if self.compile:
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
        compiled = self.measure and all(check.confirmed for check in checks)
        if self.compile and not compiled:
            return Trial(False, next(check.reason for check in checks if not check.confirmed))
        memories = [check.verdict.memory for check in checks if check.verdict is not None]
        device = sum(m.device_total for m in memories if m) if compiled and all(memories) else None
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
        from offload_fixer.xla.fixed_modules import package_root

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

    def measurements(self, plan: Any, checked: Sequence[tuple[Any, Any, Any]]) -> tuple[Any, ...]:
        """The compiler's figures of each compilation of ``plan``'s function(s) in the fixed
        file (``checked``: (report, call, compiled fix) of the file's compilations), each against
        the same compilation unfixed (:meth:`before`)."""
        from offload_fixer.model import FixMeasurement

        functions = {(d.function.name, d.function.path) for d in plan.diagnostics if d.function is not None}
        found = []
        for report, call, check in checked:
            ref = report.function
            after = check.verdict.memory if check.verdict is not None else None
            if after is None or ref is None or (ref.name, ref.path) not in functions:
                continue
            compiler = check.verdict.compiler
            before = self.before(report, call)
            if before is None:
                found.append(FixMeasurement(ref.name, self.target, compiler, after))
            else:
                found.append(FixMeasurement(ref.name, self.target, compiler, after, before[0], before[1]))
        return tuple(found)

    def before(self, report: Any, call: Any) -> tuple[Any, str] | None:
        """(the unfixed compilation's figures, their baseline): with its failing outputs
        declared host, from the run's own ``--confirm`` where it compiled so
        (``Report.xla_accepted``: the program is not compiled again), else compiled once here;
        where XLA does not compile that, without its offload
        (:func:`~offload_fixer.xla.confirm_fixes.original_memory`). Once per compilation."""
        from offload_fixer.model import HOST_OUTPUTS_BASELINE
        from offload_fixer.xla.confirm_fixes import original_memory

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


def saved_calls(saved: Any, console: Console) -> tuple[Pod | None, dict[int, Any]]:
    """The pod a report was made for (``run --topology``), where libtpu can build it here, and
    the report's recorded calls on its devices (``fix REPORT``). A call whose mesh names
    devices this process does not see (no libtpu for the pod, or a CPU mesh of more devices
    than this machine gives) is left out, and said: its functions' fixes are not lowered again."""
    from offload_fixer.report_file import AbstractCall, MissingDevices, decode_call
    from offload_fixer.xla import compilers

    pod = None
    if saved.topology is not None and compilers.installed("tpu") is not None:
        from offload_fixer.jax_compat.pod import PodUnavailable, start

        try:
            pod = start(saved.topology)
        except PodUnavailable as exc:
            fail(ExitCode.INPUT_ERROR, f"the report's --topology {saved.topology}: {exc}", console)
    calls: dict[int, Any] = {}
    left_out: list[str] = []
    view: AbstractContextManager[Any] = contextlib.nullcontext()
    if pod is not None:
        from offload_fixer.jax_compat.pod import pod_view

        view = pod_view(pod)
    with view:
        for index, call in saved.calls.items():
            try:
                calls[index] = AbstractCall(None, *decode_call(call))
            except MissingDevices as exc:
                left_out.append(str(exc))
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                fail(ExitCode.INPUT_ERROR, f"the report's recorded call {index} is not valid: {exc!r}", console)
    if left_out:
        where = f" (the run was made for {saved.topology}, and libtpu is not installed)" if saved.topology else ""
        console.note(
            f"offload-fixer: {len(left_out)} recorded compilation(s) not lowered again{where}: {left_out[0]}",
            always=True,
        )
    return pod, calls


def claim_only_removed(plan: Any, checked: Sequence[tuple[Any, Any, Any]]) -> Any:
    """``plan`` covering only the findings the fixed source no longer has: each covered
    finding whose code and origin the analysis of its function's fixed lowering still finds
    (``checked``: (report, call, check) of the file's compilations) is moved to
    ``left_after``. A stack moved slice by slice whose update stays host compute leaves that
    host compute (OFL1201) and what the backward pass still reads from host."""
    from offload_fixer.xla.confirm_fixes import finding_key

    def still_there(d: Any) -> bool:
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


def require_compiler(target: str, console: Console, why: str | None = None) -> None:
    """``--confirm`` (or what else needs it: ``why``) without the target's compiler: a clear
    refusal with the install command."""
    from offload_fixer import xla

    try:
        xla.require_installed(target)
    except xla.CompilerUnavailable as exc:
        fail(ExitCode.NO_COMPILER, f"{why or f'--confirm needs the {target} compiler'}: {exc}", console)


def report_unpredicted(reports: Sequence[Any], console: Console, outcome: Outcome) -> None:
    """A compilation the compiler judges otherwise than the analysis: said in XLA's words, and
    an error of the run."""
    for report in reports:
        for difference in report.unpredicted:
            name = report.function.name if report.function else report.module_name
            console.note(console.styled_error(f"offload-fixer: {name}: {difference}"), always=True)
            outcome.failure = outcome.failure or ExitCode.FINDINGS


def report_compiled(reports: Sequence[Any], console: Console) -> None:
    """``--confirm`` where the compiler compiled every compilation: said, so that a clean
    report is known to be the compiler's verdict too, not only the analysis's."""
    verdicts = [report.xla for report in reports if report.xla is not None]
    if not verdicts or len(verdicts) != len(reports) or any(v.outcome != "compiled" for v in verdicts):
        return
    if any(report.unpredicted for report in reports):
        return
    compilers = ", ".join(sorted({v.compiler for v in verdicts}))
    count = len(verdicts)
    console.note(
        f"offload-fixer: --confirm: {compilers} compiled {count} compilation{'s' if count != 1 else ''}, as predicted"
    )
