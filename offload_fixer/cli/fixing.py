"""Applying and showing fixes for the commands: ``--fix``, ``--diff``, ``--unsafe-fixes`` and
``--confirm`` (a fix the compiler still rejects is refused)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from offload_fixer import codes
from offload_fixer.cli.options import Console, Invocation, Outcome, fail
from offload_fixer.exit_codes import ExitCode
from offload_fixer.model import Diagnostic

if TYPE_CHECKING:
    from offload_fixer.fixes.scope import WriteScope


# ---------------------------------------------------------------------------------------
# Fixes
@dataclass
class FixRun:
    """What applying (or diffing) the fixes did."""

    results: list[Any]
    resolved: list[Diagnostic]
    """Diagnostics the applied fixes remove."""
    failure: ExitCode | None = None

    @property
    def changed(self) -> bool:
        return any(r.changed and r.error is None for r in self.results)


def apply_fixes(
    diagnostics: Sequence[Diagnostic],
    strategy: str,
    invocation: Invocation,
    jax_version: str | None,
    console: Console,
    expected_sha256: dict[str, str] | None = None,
    source: tuple[str, bytes] | None = None,
    confirm: FixConfirmation | None = None,
    reports: Sequence[Any] = (),
    scope: WriteScope | None = None,
    texts: dict[str, bytes] | None = None,
) -> FixRun:
    """Plan, then write (``--fix``) or only compute (``--diff``, stdin) the fixes.
    ``source``: (path, text) read from stdin, fixed in memory. ``confirm``: each fixed file's
    functions are compiled by the released compiler first; a file whose fix XLA rejects is
    left untouched. ``reports``: the analysis reports of ``run``, whose output trees
    host-output fixes mirror. ``expected_sha256`` (a saved or just-made run's hashes): a file
    it holds no hash of is refused. ``scope``: the files a fix may write, any other refused
    with its path. ``texts``: the files' contents as fixed so far in memory (``check --fix``'s
    later rounds), fixed again in memory whatever ``invocation.write`` says."""
    from offload_fixer.findings import resolved_by
    from offload_fixer.fixes import FIXABLE_CODES, apply_plans, plan_fixes
    from offload_fixer.fixes.apply import apply_to_source
    from offload_fixer.fixes.errors import NOTHING_WRITTEN, UNHASHED, OutsideScopeError, UnhashedSourceError
    from offload_fixer.jax_compat import UnsupportedJaxVersion
    from offload_fixer.recursion import call_allowing_deep_recursion

    if not any(d.code in FIXABLE_CODES for d in diagnostics):
        return FixRun([], [])
    if source:
        texts = {source[0]: source[1]}
    try:
        plans = call_allowing_deep_recursion(
            lambda: plan_fixes(
                list(diagnostics), strategy=strategy, jax_version=jax_version, texts=texts, reports=reports
            )
        )
    except UnsupportedJaxVersion as exc:
        fail(ExitCode.UNSUPPORTED_JAX, str(exc), console)
    except RecursionError:
        fail(
            ExitCode.INPUT_ERROR,
            "the source is nested too deeply to plan fixes for (Python's recursion limit)",
            console,
        )
    refused = []
    if expected_sha256 is not None:
        plans = [_with_expected_hash(plan, expected_sha256) for plan in plans]
        refused += [
            refuse(p.path, UnhashedSourceError(p.path, UNHASHED)) for p in plans if not p.source_sha256 and p.path
        ]
    if scope is not None and not source:
        refused += [
            refuse(p.path, OutsideScopeError(p.path, f"{why}; {NOTHING_WRITTEN}"))
            for p in plans
            if p.path and (why := scope.refusal(p.path))
        ]
    refused = list({r.path: r for r in refused}.values())
    plans = [p for p in plans if p.path not in {r.path for r in refused}]
    if source:
        results = [apply_to_source(source[0], source[1], plans, unsafe=invocation.unsafe_fixes)]
    elif texts is not None:
        results = apply_plans(plans, write=False, unsafe=invocation.unsafe_fixes, texts=texts)
    elif confirm is not None:
        from offload_fixer.fixes.apply import choose_plans
        from offload_fixer.fixes.candidates import candidate_plans

        alternatives = candidate_plans(
            list(diagnostics),
            strategy,
            jax_version,
            reports=reports,
            eligible=lambda plan: bool(choose_plans([plan], invocation.unsafe_fixes)[0]),
        )
        results = confirm.apply(plans, invocation, console, alternatives)
    else:
        results = apply_plans(plans, write=invocation.write, unsafe=invocation.unsafe_fixes)
    results = refused + results
    failure = None
    resolved: dict[Diagnostic, None] = {}
    for result in results:
        if result.error is not None:
            why = getattr(result.error, "message", None) or str(result.error)
            console.note(console.styled_error(f"offload-fixer: {result.path}: fix refused: {why}"), always=True)
            code = _FIX_ERROR_CODES.get(type(result.error).__name__, ExitCode.FIX_REFUSED)
            failure = ExitCode.FIX_REFUSED if ExitCode.FIX_REFUSED in (failure, code) else code
            continue
        if invocation.verbose:
            for plan, why in result.skipped:
                hint = " (--unsafe-fixes applies it)" if why.startswith("unsafe") else ""
                console.note(f"offload-fixer: {result.path}: not applied ({plan.title}): {why}{hint}")
        for plan in result.applied:
            resolved.update(dict.fromkeys(resolved_by(plan, diagnostics)))
    return FixRun(results, list(resolved), failure)


_FIX_ERROR_CODES = {
    "SourceReadError": ExitCode.INPUT_ERROR,
    "SourceEncodingError": ExitCode.INPUT_ERROR,
    "SourceSyntaxError": ExitCode.INPUT_ERROR,
}
"""A fix that fails because the file cannot be read or compiled as it is: an input error, as
``check`` reports it; every other refusal exits 5."""


def apply_fixes_per_file(
    diagnostics: Sequence[Diagnostic],
    settings_for: Callable[[str], Any],
    default,
    invocation: Invocation,
    console: Console,
    scope: WriteScope | None = None,
    texts: dict[str, bytes] | None = None,
) -> FixRun:
    """:func:`apply_fixes` with each file's own strategy and JAX version (its nearest
    ``[tool.offload-fixer]`` table), one planning per combination."""
    from offload_fixer.report import primary_span

    groups: dict[tuple[str, str | None], list[Diagnostic]] = {}
    for d in diagnostics:
        span = primary_span(d)
        own = settings_for(span.path) if span and span.path and os.path.exists(span.path) else default
        groups.setdefault((own.strategy, own.jax_version), []).append(d)
    combined = FixRun([], [])
    for (strategy, jax_version), group in groups.items():
        run = apply_fixes(group, strategy, invocation, jax_version, console, scope=scope, texts=texts)
        combined.results += run.results
        combined.resolved += run.resolved
        combined.failure = worse_failure(combined.failure, run.failure)
    return combined


def worse_failure(first: ExitCode | None, second: ExitCode | None) -> ExitCode | None:
    """A refused fix (5) outranks the other failures of fixing; else the first one."""
    return ExitCode.FIX_REFUSED if ExitCode.FIX_REFUSED in (first, second) else (first or second)


def fix_in_memory_then_write(
    diagnostics: Sequence[Diagnostic],
    check_again: Callable[[dict[str, bytes]], list[Diagnostic]],
    settings_for: Callable[[str], Any],
    default,
    invocation: Invocation,
    console: Console,
    scope: WriteScope,
    rounds: int,
) -> tuple[FixRun, list[Diagnostic], list[Diagnostic]]:
    """``check --fix``: fix, check the fixed text again and fix again while that changes it
    (one fix can uncover the next finding), all in memory, at most ``rounds`` checks; then
    each file is replaced once, atomically, guarded by the bytes first analysed. An
    interrupted run leaves every file as it was or fully fixed, never in a middle state.

    Returns (what was written, the findings now: of the fixed text where it was written, as
    analysed elsewhere, and every finding seen on the way, for ``--show-fixes``)."""
    from offload_fixer.fixes import FixError
    from offload_fixer.fixes.apply import write_fixed
    from offload_fixer.report import primary_span

    def path_of(d: Diagnostic) -> str | None:
        span = primary_span(d)
        return span.path if span else None

    analysed: dict[str, bytes] = {}
    current: dict[str, bytes] = {}
    fixed: dict[str, Any] = {}
    refused: set[str] = set()
    failure: ExitCode | None = None
    resolved: list[Diagnostic] = []
    seen = list(diagnostics)
    latest = list(diagnostics)
    for _ in range(rounds):
        run = apply_fixes_per_file(
            [d for d in latest if path_of(d) not in refused],
            settings_for,
            default,
            invocation,
            console,
            scope=scope,
            texts=dict(current),
        )
        failure = worse_failure(failure, run.failure)
        changed = False
        for result in run.results:
            if result.error is not None:
                refused.add(result.path)
            elif result.changed:
                analysed.setdefault(result.path, result.old_data)
                current[result.path] = result.new_data
                earlier = fixed.get(result.path)
                fixed[result.path] = dataclasses.replace(
                    result,
                    old_text=earlier.old_text if earlier else result.old_text,
                    applied=(earlier.applied if earlier else ()) + result.applied,
                )
                changed = True
        resolved += run.resolved
        if not changed:
            break
        latest = check_again(dict(current))
        seen += latest
    written: list[Any] = []
    unwritten: set[str] = set()
    for path, data in current.items():
        try:
            diff = write_fixed(path, analysed[path], data)
        except FixError as error:
            console.note(console.styled_error(f"offload-fixer: {path}: fix refused: {error.message}"), always=True)
            failure = worse_failure(failure, _FIX_ERROR_CODES.get(type(error).__name__, ExitCode.FIX_REFUSED))
            unwritten.add(path)
            continue
        written.append(dataclasses.replace(fixed[path], diff=diff, written=True))
    now = [d for d in latest if path_of(d) not in unwritten]
    now += [d for d in diagnostics if path_of(d) in unwritten]
    kept = {r.path for r in written}
    done = FixRun(written, [d for d in dict.fromkeys(resolved) if path_of(d) in kept], failure)
    return done, now, seen


class FixConfirmation:
    """Each fixed file's checked functions lowered again from the fixed text before anything
    is written, and compiled where the compiler is installed (a requirement with ``--confirm``,
    ``compile``) to measure it (:mod:`offload_fixer.xla.confirm_fixes`). A plan that fails is
    not written: the next candidate for its root cause is tried (:mod:`offload_fixer.fixes.candidates`)."""

    def __init__(self, reports: Sequence[Any], calls: dict[int, Any], target: str, compile: bool = True) -> None:
        from offload_fixer.xla import compilers

        self.reports = list(reports)
        self.calls = calls
        self.target = target
        self.compile = compile
        self.measure = compile or compilers.installed(target) is not None
        """Compile to measure even without ``--confirm``, where the compiler is installed."""

    def apply(
        self,
        plans: Sequence[Any],
        invocation: Invocation,
        console: Console,
        alternatives: Mapping[tuple[str, Any], Sequence[Any]] | None = None,
    ) -> list[Any]:
        """``plans`` checked file by file, each failing one replaced by the next of its
        ``alternatives`` (per (file, root cause), from ``candidate_plans``), then written."""
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
        if invocation.write and confirmed:
            written = {
                r.path: r
                for r in apply_plans(
                    [p for chosen in confirmed.values() for p in chosen], write=True, unsafe=invocation.unsafe_fixes
                )
            }
            results = [
                dataclasses.replace(written[r.path], skipped=r.skipped) if r.path in written else r for r in results
            ]
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
        choice = choose(options, lambda trial: self._check(path, trial), measure=self.measure)
        unchosen = [p for p in plans if p not in chosen]
        for first, instead, why in choice.replaced:
            self.notes.append(f"{instead.title}, instead of {first.title} ({why})")
        if not choice.plans:
            said = "not confirmed by the compiler" if self.compile else "no candidate plan lowers"
            reason = choice.left[0][1] if choice.left else "no plan"
            result = apply_plans(unchosen, write=False, unsafe=unsafe)[0] if unchosen else None
            from offload_fixer.fixes.apply import FileResult

            return (
                FileResult(
                    path,
                    "",
                    "",
                    "",
                    skipped=tuple(result.skipped if result else ()),
                    error=FixNotConfirmedError(path, f"{said}: {reason}"),
                ),
                [],
            )
        for plan, why in choice.left:
            self.notes.append(f"left unfixed ({plan.title}): {why}")
        result = apply_plans([*choice.plans, *unchosen], write=False, unsafe=unsafe)[0]
        result = dataclasses.replace(result, skipped=result.skipped + choice.left)
        trial = choice.trial
        checks = trial.detail[1] if trial is not None and trial.detail else []
        if checks and all(c.verdict is not None for c in checks):
            compiler = checks[0].verdict.compiler
            how = (
                f"the fix compiles ({compiler} confirmed {len(checks)} compilation{'s' if len(checks) != 1 else ''})"
                if trial is not None and trial.compiled
                else f"the fix lowers; {compiler} does not compile it ({checks[0].reason})"
            )
            memory = self.memory(result, checks) if trial is not None and trial.compiled else ""
            self.notes.append(how + (f": {memory}" if memory else ""))
            if memory:
                applied = tuple(dataclasses.replace(p, measured=memory) for p in result.applied)
                result = dataclasses.replace(result, applied=applied)
        return result, list(choice.plans)

    def _check(self, path: str, plans: Sequence[Any]) -> Any:
        """Lower (and compile, to measure) ``path`` with ``plans`` applied in memory; the outputs
        of the findings they leave unfixed are declared host before compiling."""
        from offload_fixer.fixes import apply_plans
        from offload_fixer.fixes.candidates import Trial
        from offload_fixer.xla.confirm_fixes import compile_fixed, import_safe

        result = apply_plans(plans, write=False, unsafe=True)[0]
        if result.error is not None:
            return Trial(False, getattr(result.error, "message", None) or str(result.error))
        if not result.changed:
            return Trial(False, "the edit changes nothing")
        if not self.compile and not import_safe(result.new_text):
            return Trial(True, detail=(result, []))  # importing it would run the program again: not lowered
        # by finding, not by output: two root causes can reach one output
        covered = {(d.function, d.output_index, d.message) for p in plans for d in p.covered}
        checks = []
        for report, call in self._calls(path):
            left = [
                d.output_index
                for d in report.by_code(codes.HOST_VALUE_DEVICE_OUTPUT)
                if d.output_index is not None and (d.function, d.output_index, d.message) not in covered
            ]
            checks.append(
                compile_fixed(
                    path, result.new_text, report.function, call.args, call.kwargs, self.target, self.measure, left
                )
            )
        if not self.compile:
            checks = [check for check in checks if check.located]
        if not checks:
            if self.compile:
                return Trial(False, "no checked compilation of this file to compile the fix with")
            return Trial(True, detail=(result, []))  # no recorded call of this file's functions
        failing = next((check for check in checks if not check.lowered), None)
        if failing is not None:
            return Trial(False, failing.reason)
        compiled = self.measure and all(check.confirmed for check in checks)
        if self.compile and not compiled:
            return Trial(False, next(check.reason for check in checks if not check.confirmed))
        memories = [check.verdict.memory for check in checks if check.verdict is not None]
        device = sum(m.device_total for m in memories if m) if compiled and all(memories) else None
        return Trial(True, compiled=compiled, device_bytes=device, detail=(result, checks))

    def _calls(self, path: str) -> list[tuple[Any, Any]]:
        """(report, recorded call) of each checked compilation of a function of ``path``."""
        return [
            (report, call)
            for index, report in enumerate(self.reports)
            if (call := self.calls.get(index)) is not None
            and report.function is not None
            and report.function.path
            and os.path.abspath(report.function.path) == os.path.abspath(path)
        ]

    def memory(self, result: Any, checks: Sequence[Any]) -> str:
        """``HBM +4.0 MiB (temporaries), host 2.0 GiB kept`` for the first checked function:
        the compiler's figures of the fix against the unfixed program with its failing outputs
        declared host."""
        from offload_fixer.xla.confirm_fixes import describe_memory, original_memory

        after = checks[0].verdict.memory if checks and checks[0].verdict is not None else None
        found = self._calls(result.path)
        if after is None or not found:
            return ""
        report, call = found[0]
        failing = [d.output_index for d in report.by_code(codes.HOST_VALUE_DEVICE_OUTPUT) if d.output_index is not None]
        before = original_memory(
            result.path, result.old_text, report.function, call.args, call.kwargs, self.target, failing
        )
        return describe_memory(before, after)


def require_compiler(target: str, console: Console) -> None:
    """``--confirm`` without the target's compiler: a clear refusal with the install command."""
    from offload_fixer import xla

    try:
        xla.oracle(target).spawn()
    except xla.CompilerUnavailable as exc:
        fail(ExitCode.NO_COMPILER, f"--confirm needs the {target} compiler: {exc}", console)


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


def _with_expected_hash(plan, expected: dict[str, str]):
    """The plan guarded by the run's hash of its file (none where the run took none)."""
    digest = expected.get(plan.path) or expected.get(os.path.abspath(plan.path))
    return dataclasses.replace(plan, source_sha256=digest)


def refuse(path: str, error: Exception):
    from offload_fixer.fixes.apply import FileResult

    return FileResult(path, "", "", "", error=error)  # type: ignore[arg-type]


def colour_diff(diff: str, color: bool) -> str:
    if not color:
        return diff
    colours = {"+": "green", "-": "red", "@": "cyan"}
    out = []
    for line in diff.splitlines(keepends=True):
        colour = None if line.startswith(("+++", "---")) else colours.get(line[:1])
        out.append(click.style(line, fg=colour) if colour else line)
    return "".join(out)


def would_fix_line(count: int, unsafe: int = 0) -> str:
    """ruff's closing line for ``--diff`` (``unsafe``: findings only ``--unsafe-fixes`` would
    fix); empty when there is nothing to fix, where ruff prints nothing."""
    fixes = f"{unsafe} {'additional ' if count else ''}fix{'es' if unsafe != 1 else ''} available with `--unsafe-fixes`"
    if count:
        return f"Would fix {count} problem{'s' if count != 1 else ''}" + (f" ({fixes})." if unsafe else ".")
    return f"No problems would be fixed ({fixes})." if unsafe else ""


def fixed_listing(run: FixRun, diagnostics: Sequence[Diagnostic], root: str) -> str:
    """``--fix --show-fixes``: what was fixed, per file and code, as ruff lists it."""
    from offload_fixer.findings import group_findings
    from offload_fixer.report import display_path, primary_span
    from offload_fixer.rules import UnknownRule, get_rule

    resolved = set(run.resolved)
    found = [f for f in group_findings(diagnostics) if all(d in resolved for d in f.diagnostics)]
    if not found:
        return ""
    per_file: dict[str, dict[str, int]] = {}
    for finding in found:
        span = primary_span(finding.head)
        codes = per_file.setdefault(display_path(span.path, root) if span else "<unknown>", {})
        codes[finding.head.code] = codes.get(finding.head.code, 0) + 1
    lines = [f"Fixed {len(found)} problem{'s' if len(found) != 1 else ''}:"]
    for path, codes in sorted(per_file.items()):
        lines.append(f"- {path}:")
        for code, count in sorted(codes.items()):
            try:
                name = f" ({get_rule(code).name})"
            except UnknownRule:
                name = ""
            lines.append(f"    {count} × {code}{name}")
    return "\n".join(lines) + "\n\n"
