"""Applying and showing fixes for the commands: ``--fix``, ``--diff``, ``--unsafe-fixes`` and
``--confirm`` (a fix the compiler still rejects is refused)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from offload_fixer.cli.options import Console, Invocation, fail
from offload_fixer.exit_codes import ExitCode, worse_failure
from offload_fixer.model import Diagnostic

if TYPE_CHECKING:
    from offload_fixer.cli.on_accelerator import FixedRun
    from offload_fixer.fixes.scope import WriteScope
    from offload_fixer.verify.stage import Verifier


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

    def measured(self, again: FixedRun | None = None) -> list[Any]:
        """What the verification stage found of each fix: made (``--fix``) or shown (``--diff``,
        ``[*]``) with the compiler's figures or ``not verified: ...``, or refused with why, as the
        formats and the run report carry it (``model.MeasuredFix``). ``again``: on an
        accelerator, the fixed program's run there, whose figures each written fix carries."""
        from offload_fixer.findings import location
        from offload_fixer.model import MeasuredFix

        def record(result: Any, plan: Any, refused: str = "") -> MeasuredFix:
            ran = again is not None and result.written and not refused
            return MeasuredFix(
                path=result.path,
                title=plan.title,
                strategy=plan.strategy,
                safety=plan.safety,
                codes=tuple(dict.fromkeys(d.code for d in (plan.covered if not refused else plan.diagnostics))),
                measured=plan.measured,
                written=result.written and (again is None or result.path not in again.reverted),
                span=location(plan.diagnostics[0]) if plan.diagnostics else None,
                unverified=plan.unverified,
                refused=refused,
                held=again.held if ran and again is not None else None,
                steps=again.steps_of(plan) if ran and again is not None else (),
            )

        found = [
            record(result, plan)
            for result in self.results
            if result.error is None and result.changed
            for plan in result.applied
            if plan.measured or plan.unverified or (again is not None and result.written)
        ]
        found += [
            record(result, plan, why)
            for result in self.results
            for plan, why in result.skipped
            if result.path and plan.safety != "display-only" and not why.startswith(("unsafe", "display-only"))
        ]
        return found


def apply_fixes(
    diagnostics: Sequence[Diagnostic],
    strategy: str,
    invocation: Invocation,
    jax_version: str | None,
    console: Console,
    expected_sha256: dict[str, str] | None = None,
    source: tuple[str, bytes] | None = None,
    verifier: Verifier | None = None,
    reports: Sequence[Any] = (),
    scope: WriteScope | None = None,
    texts: dict[str, bytes] | None = None,
) -> FixRun:
    """Plan, then write (``--fix``) or only compute (``--diff``, stdin) the fixes.
    ``source``: (path, text) read from stdin, fixed in memory. ``verifier``: the verification
    stage, asked about each file's plans before anything is written (a plan that does not hold
    is replaced by the next candidate, or left). ``reports``: the analysis reports of ``run``, whose output trees
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
    if verifier is not None:  # a file changed since the run is refused as that, before any plan is tried
        refused += changed_since_analysed([p for p in plans if p.path not in {r.path for r in refused}])
    refused = list({r.path: r for r in refused}.values())
    plans = [p for p in plans if p.path not in {r.path for r in refused}]
    if source:
        results = [apply_to_source(source[0], source[1], plans, unsafe=invocation.unsafe_fixes)]
    elif texts is not None:
        results = apply_plans(plans, write=False, unsafe=invocation.unsafe_fixes, texts=texts)
    elif verifier is not None:
        from offload_fixer.fixes.apply import choose_plans
        from offload_fixer.fixes.candidates import candidate_plans

        alternatives = candidate_plans(
            list(diagnostics),
            strategy,
            jax_version,
            reports=reports,
            eligible=lambda plan: bool(choose_plans([plan], invocation.unsafe_fixes)[0]),
        )
        results = verified_results(verifier, plans, invocation, console, alternatives, scope)
    else:
        results = apply_plans(plans, write=invocation.write, unsafe=invocation.unsafe_fixes, scope=scope)
    results = refused + results
    failure = None
    resolved: dict[Diagnostic, None] = {}
    for result in results:
        if result.error is not None:
            why = getattr(result.error, "message", None) or str(result.error)
            console.note(
                console.styled_error(f"offload-fixer: {shown_path(result.path)}: fix refused: {why}"), always=True
            )
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


def verify_fixes(
    diagnostics: Sequence[Diagnostic],
    strategy: str,
    invocation: Invocation,
    verifier: Verifier,
    reports: Sequence[Any],
    expected_sha256: dict[str, str],
) -> FixRun:
    """What ``--fix`` would write, checked by the same ``verifier`` as it checks before writing
    (each fixed file's functions lowered again with the recorded shapes and shardings, and
    compiled where the compiler is installed), nothing written and nothing said: plain ``run``
    marks ``[*]`` only what ``--fix`` writes (:func:`marks_after_fixing`)."""
    from offload_fixer.findings import resolved_by
    from offload_fixer.fixes import FIXABLE_CODES, plan_fixes
    from offload_fixer.fixes.apply import choose_plans
    from offload_fixer.fixes.candidates import candidate_plans
    from offload_fixer.jax_compat import UnsupportedJaxVersion
    from offload_fixer.recursion import call_allowing_deep_recursion

    if not any(d.code in FIXABLE_CODES for d in diagnostics):
        return FixRun([], [])
    unsafe = invocation.unsafe_fixes
    try:
        plans = call_allowing_deep_recursion(lambda: plan_fixes(list(diagnostics), strategy, reports=reports))
        alternatives = call_allowing_deep_recursion(
            lambda: candidate_plans(
                list(diagnostics),
                strategy,
                reports=reports,
                eligible=lambda plan: bool(choose_plans([plan], unsafe)[0]),
            )
        )
    except (RecursionError, UnsupportedJaxVersion):  # the planner's own marks stand
        return FixRun([], [])
    by_path: dict[str, list[Any]] = {}
    for plan in plans:
        if plan.path:
            by_path.setdefault(plan.path, []).append(_with_expected_hash(plan, expected_sha256))
    results = [verifier.choose_file(path, ps, unsafe, alternatives)[0] for path, ps in by_path.items()]
    resolved: dict[Diagnostic, None] = {}
    for result in results:
        for plan in result.applied if result.error is None else ():
            resolved.update(dict.fromkeys(resolved_by(plan, diagnostics)))
    return FixRun(results, list(resolved))


def verified_results(
    verifier: Verifier,
    plans: Sequence[Any],
    invocation: Invocation,
    console: Console,
    alternatives: Mapping[tuple[str, Any], Sequence[Any]],
    scope: Any = None,
) -> list[Any]:
    """``plans`` checked file by file by the verification stage, each failing one replaced by
    the next of its ``alternatives`` (per (file, root cause), from ``candidate_plans``), what it
    did said one line each, then the chosen plans written (``invocation.write``) where ``scope``
    (a :class:`~offload_fixer.fixes.scope.WriteScope`) lets them be."""
    from offload_fixer.fixes import apply_plans
    from offload_fixer.report import display_path

    by_path: dict[str, list[Any]] = {}
    for plan in plans:
        by_path.setdefault(plan.path, []).append(plan)
    results = []
    confirmed: dict[str, list[Any]] = {}
    for path, file_plans in by_path.items():
        result, chosen = verifier.choose_file(path, file_plans, invocation.unsafe_fixes, alternatives)
        for line in verifier.notes:
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
        results = [dataclasses.replace(written[r.path], skipped=r.skipped) if r.path in written else r for r in results]
        results += [r for path, r in written.items() if path not in {x.path for x in results}]
    return results


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
    from offload_fixer.findings import resolved_by
    from offload_fixer.fixes import FixError
    from offload_fixer.fixes.apply import write_fixed
    from offload_fixer.report import primary_span

    def path_of(d: Diagnostic) -> str | None:
        span = primary_span(d)
        return span.path if span else None

    analysed: dict[str, bytes] = {}
    current: dict[str, bytes] = {}
    fixed: dict[str, Any] = {}
    refused: dict[str, Any] = {}
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
                refused.setdefault(result.path, result)
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
            diff = write_fixed(path, analysed[path], data, scope)
        except FixError as error:
            console.note(
                console.styled_error(f"offload-fixer: {shown_path(path)}: fix refused: {error.message}"), always=True
            )
            failure = worse_failure(failure, _FIX_ERROR_CODES.get(type(error).__name__, ExitCode.FIX_REFUSED))
            unwritten.add(path)
            plans = fixed[path].applied
            refused[path] = dataclasses.replace(refuse(path, error), skipped=tuple((p, error.message) for p in plans))
            continue
        written.append(dataclasses.replace(fixed[path], diff=diff, written=True))
    # A file left unwritten leaves every finding its fixes removed in memory, in any file
    # (a jit site's OFL1200 fixed in the module of its function).
    left = {d for path in unwritten for plan in fixed[path].applied for d in resolved_by(plan, diagnostics)}
    now = [d for d in latest if path_of(d) not in unwritten]
    now += [d for d in diagnostics if path_of(d) in unwritten or d in left]
    kept = {r.path for r in written}
    resolved = [d for d in dict.fromkeys(resolved) if path_of(d) in kept and d not in left]
    # the refusals stay in the results: a finding whose fix was refused is not marked [*]
    done = FixRun(written + list(refused.values()), resolved, failure)
    return done, list(dict.fromkeys(now)), seen


def _with_expected_hash(plan, expected: dict[str, str]):
    """The plan guarded by the run's hash of its file (none where the run took none)."""
    digest = expected.get(plan.path) or expected.get(os.path.abspath(plan.path))
    return dataclasses.replace(plan, source_sha256=digest)


def shown_path(path: str) -> str:
    """A file a fix names, as every other message names it: relative to the working directory
    (a run's report holds absolute paths), or as the report wrote it where that leaves it."""
    from offload_fixer.report import display_path

    return display_path(path) if os.path.isabs(path) else path


def changed_since_analysed(plans: Sequence[Any]) -> list[Any]:
    """A refusal for each file the plans edit that is not the text they were planned from (or
    cannot be read now), with that reason alone."""
    from offload_fixer.fixes.errors import FixError
    from offload_fixer.fixes.source_io import check_fresh, read_source

    refused = []
    by_path: dict[str, list[Any]] = {}
    for plan in plans:
        if plan.path:
            by_path.setdefault(plan.path, []).append(plan)
    for path, group in by_path.items():
        try:
            check_fresh(path, read_source(path), [plan.source_sha256 for plan in group])
        except FixError as error:
            refused.append(refuse(path, error))
    return refused


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


def marks_after_fixing(
    marks_for: Callable[[list[Diagnostic]], dict], run: FixRun, verified: bool = False
) -> Callable[[list[Diagnostic]], dict]:
    """``marks_for`` (what the planner would do about each finding) with what ``--fix`` just
    found (:func:`~offload_fixer.findings.verified_marks`): ``[*]`` marks only a fix that is
    written. ``verified``: ``run`` was checked by the verification stage, which decides alone."""

    def marks(diagnostics: list[Diagnostic]) -> dict:
        from offload_fixer.findings import verified_marks

        return verified_marks(diagnostics, marks_for(diagnostics), run.results, verified)

    return marks
