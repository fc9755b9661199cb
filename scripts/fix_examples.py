"""Write the tool's own fixes of the broken examples to ``examples/fixed/``, one per strategy.

Each broken example is run under the dynamic analysis, and its reports are planned, verified and
applied (safe fixes only, each candidate checked by the verification stage as ``offload-fixer run
--fix --strategy S`` checks it: lowered again, analysed again, compiled, its placement and HBM held
to the author's) to a copy named ``examples/fixed/<example>.<strategy>.py``; then what only the
static check sees (a remat policy's ``offload_dst``, which leaves no trace in the lowered module)
is fixed the same way, as ``offload-fixer check --fix --strategy S`` does. A strategy whose fix the
tool declines (display-only, unsafe, or refused by the verification) writes no file;
``examples/fixed/README.md`` says why. ``tests/examples`` checks that
the committed files are exactly what this produces, that they run with the same losses, that a
second fix changes nothing, and that the released TPU compiler compiles them.

    .venv/bin/python scripts/fix_examples.py            # rewrite examples/fixed/
    .venv/bin/python scripts/fix_examples.py --out DIR  # write elsewhere (the test does)
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from offload_fixer.model import FIX_STRATEGIES

ROOT = Path(__file__).resolve().parent.parent
BROKEN = ("optimizer_offload_broken", "param_streaming_broken", "unpinned_host_trap")
STRATEGIES = ("auto", *FIX_STRATEGIES)
"""``--strategy workaround`` is left out: it is ``auto`` where no known compiler bug applies,
as in these examples."""


def fix_example(name: str, strategy: str, out: Path) -> tuple[Path | None, list[str]]:
    """The fixed copy (or None) and why fixes were not applied."""
    from offload_fixer.fixes import apply_plans, plan_fixes
    from offload_fixer.fixes.candidates import candidate_plans
    from offload_fixer.fixes.writing import write_source
    from offload_fixer.runner import run_program
    from offload_fixer.static import check_paths
    from offload_fixer.verify.stage import Verifier

    copy = out / f"{name}.{strategy}.py"
    shutil.copyfile(ROOT / "examples" / f"{name}.py", copy)
    result = run_program(str(copy), [], target="tpu")
    if result.program_exit_code != 0:
        raise RuntimeError(f"{name} failed under the analysis:\n{result.program_exception}")
    declined: list[str] = []
    written = False
    diagnostics = [d for r in result.reports for d in r.diagnostics]
    plans = [p for p in plan_fixes(result.reports, strategy=strategy) if p.path == str(copy)]
    alternatives = candidate_plans(
        diagnostics, strategy, reports=result.reports, eligible=lambda plan: plan.safety == "safe"
    )
    verifier = Verifier(result.reports, result.calls, "tpu", strategy=strategy)
    verified, _ = verifier.choose_file(str(copy), plans, False, alternatives)
    declined.extend(f"{plan.title}: {why}" for plan, why in verified.skipped)
    if verified.error is None and verified.changed:
        write_source(str(copy), verified.old_data, verified.new_data)
        written = True
    # only what the dynamic analysis cannot see: a finding it made is the verification's to fix or refuse
    seen = {(d.code, _line(d)) for d in diagnostics}
    static = [
        d for r in check_paths([str(copy)], target="tpu") for d in r.diagnostics if (d.code, _line(d)) not in seen
    ]
    for file_result in apply_plans(plan_fixes(static, strategy=strategy), write=True):
        file_result.raise_for_error()
        declined.extend(f"{plan.title}: {why}" for plan, why in file_result.skipped)
        written |= file_result.changed
    if not written:
        copy.unlink()
        return None, declined
    return copy, declined


def _line(diagnostic) -> int | None:
    span = diagnostic.origin.span if diagnostic.origin is not None and diagnostic.origin.span else diagnostic.span
    return span.line if span is not None else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "examples" / "fixed")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out.resolve()
    for name in BROKEN:
        for strategy in STRATEGIES:
            path, declined = fix_example(name, strategy, out)
            shown = (path.relative_to(ROOT) if path.is_relative_to(ROOT) else path) if path else "no safe fix"
            print(f"{name} --strategy {strategy}: {shown}")
            for why in declined:
                print(f"    declined: {why}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
