"""What each fix does to a program, judged by the released compilers and by running it.

The corpus is ``tests/fixes/quality/``: real programs that XLA rejects with error 1200 (4- and
8-device meshes, scans streaming weights from host, remat offload, donation, dataclass, flax and
NamedTuple state, sharding trees built by functions in other modules, KV caches, scatters into
host buffers). Each program states the placement its author intends in ``INTENDED_HOST_OUTPUTS``
(the output paths that live in host memory; every other output is device memory) and gives
``example()``, which runs its jitted function on concrete inputs.

Per program and strategy it reports:

* ``fix``: ``fixed`` (an edit was made under ``--fix``), or ``left`` and why;
* ``lowers``: the fixed function, imported from the fixed source, traced and lowered again with
  the argument shapes and shardings ``run`` recorded;
* ``tpu``, ``gpu``: whether libtpu and the CUDA plugin compile it (deviceless);
* ``cpu``: whether ``example()`` of the fixed program gives outputs allclose to the original's;
* ``placement``: whether every argument keeps its declared memory kind and every output the
  intended one (under ``host``, the outputs error 1200 names may become host memory);
* HBM and host bytes (libtpu's ``memory_analysis()``) of the original with its offending
  outputs declared host (what XLA would accept unchanged; where libtpu compiles no such
  program, the original without its offload: ``before is``) and of the fixed program;
* ``stack moved to HBM whole``: host arguments the fixed module moves to device whole and then
  loops over (moving each slice would be narrower);
* ``a valid plan holding less``: each other candidate plan of the fix's root causes compiled
  alone by libtpu; one that compiles, places every output as the fix does and holds fewer HBM
  bytes fails the fix (``none of N``: N such plans compared, none holding less). So "no fix
  moves a whole host stack into HBM where a narrower valid plan exists" is measured, per shape.

The fixes are chosen as ``run --fix --confirm`` chooses them: among the candidate plans that
compile, the fewest HBM bytes.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu \\
        .venv/bin/python scripts/fix_quality.py                 # the table, every strategy
    .venv/bin/python scripts/fix_quality.py --strategy auto --json out.json PROGRAM...

(the script sets both variables itself when they are unset). Exit status 1 when a written fix
fails a check.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import io
import itertools
import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixes" / "quality"
STRATEGIES = ("auto", "host", "device")
DEVICES = 8
_names = itertools.count()


@dataclass
class Row:
    program: str
    strategy: str
    fix: str = "left"
    why: str = ""
    lowers: bool | None = None
    tpu: bool | None = None
    gpu: bool | None = None
    cpu: bool | None = None
    placement: bool | None = None
    placement_why: str = ""
    findings: int = 0
    """OFL1200 findings of the program."""
    safe: int = 0
    """OFL1200 findings a safe edit fixes."""
    hbm_before: int | None = None
    hbm_after: int | None = None
    host_before: int | None = None
    host_after: int | None = None
    baseline: str = ""
    """What the before figures are (``offload_fixer.model.FixMeasurement.baseline``): the
    original with its failing outputs declared host, or, where libtpu compiles no such
    program, the original without its offload."""
    hbm_no_offload: int | None = None
    """libtpu's HBM for the original with every host memory kind made device memory: a fix
    that keeps state on host must hold less, or it defeats the offload (the fix says so and is
    not written)."""
    moved: int | None = None
    """Bytes one call of the fixed program moves between host and device memory."""
    summary: str = ""
    """The fix's cost line, as the tool prints it."""
    whole_moved: list[str] = field(default_factory=list)
    """Host arguments the fixed program moves to device whole and then feeds to a loop (a
    scanned stack: one slice per step would do), so every byte of them is in HBM."""
    compared: int = 0
    """Other candidate plans of the fix's root causes compiled alone to compare with it (those
    that compile and place the outputs as the fix does)."""
    narrower: list[str] = field(default_factory=list)
    """Each such candidate holding fewer HBM bytes than the fix (libtpu's figures, each plan
    compiled alone): a fix that moves more into HBM than a valid plan does (a host stack moved
    whole where moving each slice holds less) fails."""
    claimed_left: list[str] = field(default_factory=list)
    """Findings the written fix claims to remove (``FixPlan.covered``) that the analysis of the
    fixed program, lowered again, still makes (same code and origin): a claim the fix does not
    keep fails it."""
    functions: list[str] = field(default_factory=list)
    """The jitted functions with findings (what the chip corpus measures)."""
    predicted: dict[str, str] = field(default_factory=dict)
    """The TPU compile outcome the tool predicts: ``original`` (the worst of its compilations:
    ``rejected``, ``aborted`` or ``compiled``), ``fixed`` (``compiled`` where a fix is written:
    it was verified so)."""
    intended_host_outputs: list[str] = field(default_factory=list)
    cpu_outputs: dict[str, Any] | None = None
    """The unfixed program's outputs on the CPU (``chip_corpus.summarise``): what the fixed
    program must give on the chip."""
    fixed_text: str = ""
    """The fixed source written (``--save-fixed`` keeps it as a file)."""
    refused_text: str = ""
    """Where the verification refused every candidate: the first one's source, as it would have
    been written unchecked (``--save-fixed`` keeps it as ``NAME.refused.py``)."""
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What choosing among the candidate plans said (another plan chosen, the fix's figures)."""

    @property
    def good(self) -> bool:
        """A written fix passes every check; a program left unfixed passes vacuously. Under
        ``device`` the placement is not a check: that strategy returns host values in device
        memory, as asked."""
        if self.fix != "fixed":
            return True
        placement = self.placement if self.strategy != "device" else None
        checks = (self.lowers, self.tpu, self.gpu, self.cpu, placement)
        return all(v is not False for v in checks) and not self.narrower and not self.claimed_left


def programs(names: list[str] | None = None, corpus: Path = CORPUS) -> list[Path]:
    """The corpus programs (files that state ``INTENDED_HOST_OUTPUTS``), or those named."""
    found = [p for p in sorted(corpus.glob("*.py")) if "INTENDED_HOST_OUTPUTS" in p.read_text(encoding="utf-8")]
    if names:
        wanted = {Path(n).stem for n in names}
        found = [p for p in found if p.stem in wanted]
    return found


def intended_host_outputs(path: Path) -> tuple[str, ...]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "INTENDED_HOST_OUTPUTS" for t in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    raise ValueError(f"{path}: no INTENDED_HOST_OUTPUTS")


def _import(path: Path, text: str | None = None) -> Any:
    """``path`` (or ``text`` written beside it) as a fresh module, its directory importable."""
    name = f"_fix_quality_{next(_names)}"
    source = path
    if text is not None:
        handle, temporary = tempfile.mkstemp(prefix=".fix-quality-", suffix=".py", dir=path.parent)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        source = Path(temporary)
    try:
        spec = importlib.util.spec_from_file_location(name, source)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(path.parent))
        return module
    finally:
        if text is not None:
            os.unlink(source)


def summarise(outputs: Any) -> dict[str, Any]:
    """The outputs as the chip corpus records them (``scripts/chip_corpus.py``)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from chip_corpus import summarise as chip_summary
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return chip_summary(outputs)


def _outputs(module: Any) -> Any:
    import jax

    with contextlib.redirect_stdout(io.StringIO()):
        return jax.tree.map(lambda x: jax.device_get(x), module.example())


def _allclose(a: Any, b: Any) -> bool:
    import jax
    import numpy as np

    left, right = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(left) == len(right) and all(
        np.shape(x) == np.shape(y) and np.allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6)
        for x, y in zip(left, right)
    )


def _judge(lowered: Any, target: str) -> Any:
    from offload_fixer.xla.oracle import judge

    return judge(lowered, target)


def _baseline(report: Any, lowered_text: str) -> tuple[Any, str]:
    """libtpu's verdict on the original module with each output error 1200 names declared
    host, else (libtpu compiles no such program) on the original without its offload; and
    which of the two it is (as ``run --fix`` measures: ``verify.lowering.original_memory``)."""
    from offload_fixer import codes
    from offload_fixer.model import HOST_OUTPUTS_BASELINE, NO_OFFLOAD_BASELINE
    from offload_fixer.xla.confirm import with_host_output, without_offload
    from offload_fixer.xla.oracle import judge

    text = lowered_text
    for d in report.by_code(codes.HOST_VALUE_DEVICE_OUTPUT):
        if d.output_index is not None:
            text = with_host_output(text, d.output_index)
    verdict = judge(text, "tpu")
    if verdict.memory is not None:
        return verdict, HOST_OUTPUTS_BASELINE
    return judge(without_offload(lowered_text), "tpu"), NO_OFFLOAD_BASELINE


def _moved_whole(text: str) -> list[str]:
    """The host entry arguments a module moves to device as they are and then passes into a
    ``while`` loop (a scan over the whole stack), where moving each slice would be narrower."""
    from offload_fixer.ir.module import is_move_to_device, load

    view = load(text)
    moved = []
    for arg in view.args:
        if arg.in_host_memory_space:
            value = view.entry_block.arguments[arg.index]
            moves = [use.owner for use in value.uses if is_move_to_device(use.owner)]
            if any(user.owner.name == "stablehlo.while" for move in moves for user in move.results[0].uses):
                moved.append(arg.info or f"argument {arg.index}")
    return moved


def _argument_kinds(text: str) -> list[str]:
    from offload_fixer.ir.module import load

    view = load(text)
    return [a.memory_kind for a in view.args]


def assess(
    path: Path, strategies: tuple[str, ...], compilers: bool = True, show_diff: bool = False, execute: bool = True
) -> list[Row]:
    """One row per strategy for the corpus program ``path`` (a copy in a scratch directory)."""
    from offload_fixer import codes
    from offload_fixer.fixes import plan_fixes
    from offload_fixer.fixes.candidates import candidate_plans
    from offload_fixer.runner import run_program
    from offload_fixer.verify.jit_sites import find_jitted
    from offload_fixer.verify.lowering import lower_fixed
    from offload_fixer.verify.stage import Verifier
    from offload_fixer.xla.oracle import module_text

    intended = intended_host_outputs(path)
    with contextlib.redirect_stdout(io.StringIO()):
        result = run_program(str(path), [], target="tpu", confirm=True)
    reports = [r for r in result.reports if r.function is not None]
    findings = [d for r in reports for d in r.by_code(codes.HOST_VALUE_DEVICE_OUTPUT)]
    original = _outputs(_import(path)) if execute else None
    lowered_before: dict[int, Any] = {}
    rows = []
    outcomes = [r.predicted.outcome for r in reports if r.predicted is not None]
    worst = next((o for o in ("aborted", "rejected") if o in outcomes), "compiled")
    functions = list(dict.fromkeys(r.function.name for r in reports if r.diagnostics and r.function))
    for strategy in strategies:
        row = Row(path.stem, strategy, findings=len(findings))
        row.functions = functions
        row.predicted = {"original": worst}
        row.intended_host_outputs = list(intended)
        row.cpu_outputs = summarise(original) if execute else None
        rows.append(row)
        if not findings:
            row.why = "no OFL1200 finding"
            continue
        plans = plan_fixes(result.reports, strategy)
        # as ``run --fix --confirm`` chooses: each candidate plan lowered and compiled, the fewest HBM bytes
        alternatives = candidate_plans(
            [d for r in result.reports for d in r.diagnostics],
            strategy,
            reports=result.reports,
            eligible=lambda plan: plan.safety == "safe",
        )
        confirmation = Verifier(result.reports, result.calls, "tpu", compile=compilers, strategy=strategy)
        file_plans = [p for p in plans if p.path == str(path)]
        fixed, _ = confirmation.choose_file(str(path), file_plans, False, alternatives)
        row.notes = list(confirmation.notes)
        row.safe = sum(1 for d in findings if any(d in p.covered for p in fixed.applied))
        if compilers and fixed.error is None and fixed.changed:
            _compare_candidates(row, confirmation, str(path), fixed.applied, alternatives)
        if fixed.error is not None:
            row.why = f"refused: {fixed.error}"
            if file_plans:  # what would have been written unchecked: the chip judges the refusal
                from offload_fixer.fixes import apply_plans

                unchecked = apply_plans(file_plans, write=False)[0]
                row.refused_text = unchecked.new_text if unchecked.error is None and unchecked.changed else ""
            continue
        if not fixed.changed:
            reasons = [why for _, why in fixed.skipped] + [p for plan in plans for p in plan.problems]
            row.why = "; ".join(dict.fromkeys(reasons)) or "no plan"
            continue
        row.fix = "fixed"
        row.fixed_text = fixed.new_text
        row.predicted["fixed"] = "compiled" if confirmation.compile else "lowers"
        measured = [m for plan in fixed.applied for m in plan.measured]
        if measured:
            from offload_fixer.model import describe_measurements

            row.summary = describe_measurements(measured)
            if all(m.no_offload is not None for m in measured):
                row.hbm_no_offload = sum(m.no_offload.device_total for m in measured if m.no_offload)
            if all(m.moved is not None for m in measured):
                row.moved = sum(m.moved or 0 for m in measured)
        if show_diff:
            print(fixed.diff, file=sys.stderr)
        try:
            module = _import(path, fixed.new_text)
        except Exception as exc:  # noqa: BLE001 - a fix that breaks the import is a finding of this script
            row.lowers = False
            row.problems.append(f"import: {type(exc).__name__}: {exc}")
            continue
        try:
            row.cpu = _allclose(original, _outputs(module)) if execute else None
        except Exception as exc:  # noqa: BLE001
            row.cpu = False
            row.problems.append(f"cpu: {type(exc).__name__}: {str(exc)[:200]}")
        row.lowers = True
        before: list[Any] = []
        after: list[Any] = []
        for index, report in enumerate(result.reports):
            call = result.calls.get(index)
            if call is None or report.function is None or not report.by_code(codes.HOST_VALUE_DEVICE_OUTPUT):
                continue
            jitted = find_jitted(module, report.function)
            if jitted is None:
                row.lowers = False
                row.problems.append(f"{report.function.name} not found in the fixed source")
                continue
            try:
                lowered = {t: lower_fixed(jitted, module, call.args, call.kwargs, t) for t in ("tpu", "gpu")}
            except Exception as exc:  # noqa: BLE001
                row.lowers, row.tpu, row.gpu, row.placement = False, None, None, None
                row.problems.append(f"lower: {type(exc).__name__}: {str(exc)[:300]}")
                break
            _check_claims(row, report, fixed.applied, lowered["tpu"])
            if not compilers:
                continue
            if index not in lowered_before:
                original_module = _import(path)
                original_lowered = lower_fixed(
                    find_jitted(original_module, report.function), original_module, call.args, call.kwargs, "tpu"
                )
                lowered_before[index] = module_text(original_lowered)
            verdicts = {t: _judge(lowered[t], t) for t in ("tpu", "gpu")}
            row.tpu = row.tpu is not False and verdicts["tpu"].outcome == "compiled"
            row.gpu = row.gpu is not False and verdicts["gpu"].outcome == "compiled"
            for t, v in verdicts.items():
                if v.outcome != "compiled":
                    row.problems.append(f"{t}: {v.outcome}: {v.message.splitlines()[0] if v.message else ''}"[:300])
            baseline, basis = _baseline(report, lowered_before[index])
            before.append(baseline.memory)
            row.baseline = basis if row.baseline in ("", basis) else "mixed"
            after.append(verdicts["tpu"].memory)
            if row.placement is None:
                row.placement = True
            row.whole_moved += _moved_whole(module_text(lowered["tpu"]))
            _check_placement(row, report, intended, lowered_before[index], module_text(lowered["tpu"]), verdicts)
        if before and all(m is not None for m in before):
            row.hbm_before = sum(m.device_total for m in before)
            row.host_before = sum(m.host_total for m in before)
        if after and all(m is not None for m in after):
            row.hbm_after = sum(m.device_total for m in after)
            row.host_after = sum(m.host_total for m in after)
    return rows


COMPARED = 4
"""Candidate plans per root cause compiled to compare with the fix."""


def _compare_candidates(row: Row, confirmation: Any, path: str, applied: Any, alternatives: Any) -> None:
    """Each other candidate plan of the fix's root causes (up to :data:`COMPARED`), compiled
    alone as the fix's own plan is, by libtpu: one that compiles, places every output as the
    fix does and holds fewer HBM bytes makes the fix fail (``Row.narrower``). This is measured
    here, plan by plan, not taken from the choice ``--confirm`` made."""
    from offload_fixer.findings import root_cause_key
    from offload_fixer.model import byte_size

    for plan in applied:
        if not plan.diagnostics:
            continue
        others = [
            other
            for other in alternatives.get((plan.path, root_cause_key(plan.diagnostics[0])), ())[:COMPARED]
            if other.edits != plan.edits
        ]
        if not others:
            continue
        mine = confirmation.check(path, [plan])
        if not (mine.ok and mine.compiled and mine.device_bytes is not None):
            continue
        for other in others:
            trial = confirmation.check(path, [other])
            if not (trial.ok and trial.compiled) or trial.device_bytes is None or trial.placement != mine.placement:
                continue
            row.compared += 1
            if trial.device_bytes < mine.device_bytes:
                row.narrower.append(
                    f"{other.title}: HBM {byte_size(trial.device_bytes)}, the fix {byte_size(mine.device_bytes)}"
                )


def _check_claims(row: Row, report: Any, applied: Any, lowered: Any) -> None:
    """The analysis run again on the fixed function's lowering: each finding of ``report`` that
    a written plan claims (``covered``) and that is still made there (its code and origin) is a
    claim the fix does not keep (``Row.claimed_left``)."""
    from offload_fixer.analysis import analyze
    from offload_fixer.verify.lowering import finding_key

    left = {finding_key(d) for d in analyze(lowered, "tpu", function=report.function).diagnostics}
    for plan in applied:
        for d in plan.covered:
            if d in report.diagnostics and finding_key(d) in left:
                row.claimed_left.append(f"{d.code} ({plan.title})")


def _check_placement(row: Row, report: Any, intended: tuple[str, ...], before: str, after: str, verdicts: Any) -> None:
    from offload_fixer import codes
    from offload_fixer.model import HOST_KINDS

    if _argument_kinds(before) != _argument_kinds(after):
        row.placement = False
        row.placement_why = f"argument kinds {_argument_kinds(before)} -> {_argument_kinds(after)}"
        return
    offending = {d.output_path for d in report.by_code(codes.HOST_VALUE_DEVICE_OUTPUT)}
    kinds = verdicts["tpu"].output_memory_kinds
    if not kinds:
        return  # not compiled: no placement to read
    for info in report.outputs:
        if info.index >= len(kinds):
            continue
        host = kinds[info.index] in HOST_KINDS
        wanted = info.path in intended
        if host != wanted and not (row.strategy == "host" and host and info.path in offending):
            row.placement = False
            row.placement_why = f"output {info.path or 'result'} in {kinds[info.index]}, intended " + (
                "host" if wanted else "device"
            )
            return


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _mark(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


def table(rows: list[Row]) -> str:
    header = (
        "| program | strategy | fix | lowers | tpu | gpu | cpu | placement | HBM before -> after "
        "| host before -> after | before is | stack moved to HBM whole | a valid plan holding less |"
    )
    lines = [header, "|" + "---|" * 13]
    for r in rows:
        fix = r.fix if r.fix == "fixed" else f"left: {r.why[:80]}"
        lines.append(
            f"| {r.program} | {r.strategy} | {fix} | {_mark(r.lowers)} | {_mark(r.tpu)} | {_mark(r.gpu)} "
            f"| {_mark(r.cpu)} | {_mark(r.placement)}{(' (' + r.placement_why + ')') if r.placement_why else ''} "
            f"| {_bytes(r.hbm_before)} -> {_bytes(r.hbm_after)} | {_bytes(r.host_before)} -> {_bytes(r.host_after)} "
            f"| {r.baseline or '-'} | {', '.join(r.whole_moved) or '-'} "
            f"| {'; '.join(r.narrower) or ('none of ' + str(r.compared) if r.compared else '-')} |"
        )
    return "\n".join(lines)


def summary(rows: list[Row]) -> str:
    from offload_fixer.model import HOST_OUTPUTS_BASELINE

    lines = []
    for strategy in dict.fromkeys(r.strategy for r in rows):
        mine = [r for r in rows if r.strategy == strategy]
        written = [r for r in mine if r.fix == "fixed"]
        findings = sum(r.findings for r in mine)
        safe = sum(r.safe for r in mine)
        grown = [r for r in written if r.hbm_after is not None and r.hbm_before is not None]
        declared = [r for r in grown if r.baseline == HOST_OUTPUTS_BASELINE]
        measured = [r for r in written if r.hbm_after is not None]
        lines.append(
            f"{strategy}: {len(written)}/{len(mine)} programs fixed, {sum(r.good for r in written)} of them pass "
            f"every check; {safe}/{findings} OFL1200 findings get a safe fix ({100 * safe / max(findings, 1):.0f}%); "
            f"{sum(len(r.claimed_left) for r in written)} findings a fix claims are still found in the fixed "
            f"program ({sum(bool(r.claimed_left) for r in written)} programs); "
            f"{sum(bool(r.whole_moved) for r in written)} move a host stack to HBM whole for a loop, "
            f"{sum(bool(r.whole_moved) and bool(r.narrower) for r in written)} of them where a valid plan "
            f"holds fewer HBM bytes; {sum(bool(r.narrower) for r in written)} fixes hold more HBM than another "
            f"valid plan (of {sum(r.compared for r in written)} compared, in {sum(bool(r.compared) for r in written)} "
            f"programs); "
            f"HBM measured after {len(measured)}/{len(written)} fixes, before and after {len(grown)} "
            f"({len(declared)} against the original with its failing outputs declared host, total delta "
            f"{_bytes(sum(r.hbm_after - r.hbm_before for r in declared))}; {len(grown) - len(declared)} against "
            f"the original without its offload, where libtpu compiles no such program, total delta "
            f"{_bytes(sum(r.hbm_after - r.hbm_before for r in grown if r not in declared))})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("programs", nargs="*", help="corpus program names (default: all)")
    parser.add_argument("--strategy", action="append", choices=STRATEGIES, help="default: every strategy")
    parser.add_argument("--json", help="write the rows as JSON here")
    parser.add_argument("--no-compilers", action="store_true", help="lower only; do not compile")
    parser.add_argument("--show-diff", action="store_true", help="print each fix's diff to stderr")
    parser.add_argument("--save-fixed", type=Path, help="write each fixed program here, under its own name")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help=f"the programs' folder (default: {CORPUS})")
    parser.add_argument(
        "--no-run", action="store_true", help="never run example(): programs too large for this machine (lowered only)"
    )
    args = parser.parse_args(argv)
    strategies = tuple(args.strategy or STRATEGIES)
    scratch = Path(tempfile.mkdtemp(prefix="fix-quality-"))
    try:
        shutil.copytree(args.corpus, scratch / "quality")
        rows: list[Row] = []
        for program in programs(args.programs, args.corpus):
            copy = scratch / "quality" / program.name
            try:
                rows += assess(
                    copy, strategies, not args.no_compilers, show_diff=args.show_diff, execute=not args.no_run
                )
            except Exception as exc:  # noqa: BLE001 - one program's failure is a row, not the end
                rows += [Row(program.stem, s, why=f"error: {type(exc).__name__}: {exc}") for s in strategies]
            print(
                f"{program.stem}: " + ", ".join(f"{r.strategy} {r.fix}" for r in rows[-len(strategies) :]),
                file=sys.stderr,
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.save_fixed:
        args.save_fixed.mkdir(parents=True, exist_ok=True)
        for row in rows:
            if row.fixed_text:
                (args.save_fixed / f"{row.program}.py").write_text(row.fixed_text, encoding="utf-8")
            if row.refused_text:
                (args.save_fixed / f"{row.program}.refused.py").write_text(row.refused_text, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=1), encoding="utf-8")
    print(table(rows))
    print()
    print(summary(rows))
    return 0 if all(r.good for r in rows) else 1


if __name__ == "__main__":
    os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={DEVICES}")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
