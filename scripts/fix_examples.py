"""Write the tool's own fixes of the broken examples to ``examples/fixed/``, one per strategy.

Each broken example is run under the dynamic analysis, and its diagnostics are planned and
applied (safe fixes only, as ``offload-fixer run --fix --strategy S`` does) to a copy named
``examples/fixed/<example>.<strategy>.py``. A strategy whose fix the tool declines (display-only,
or unsafe) writes no file; ``examples/fixed/README.md`` says why. ``tests/examples`` checks that
the committed files are exactly what this produces and that they compile cleanly for TPU.

    .venv/bin/python scripts/fix_examples.py            # rewrite examples/fixed/
    .venv/bin/python scripts/fix_examples.py --out DIR  # write elsewhere (the test does)
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BROKEN = ("optimizer_offload_broken", "param_streaming_broken", "unpinned_host_trap")
STRATEGIES = ("device", "host")


def fix_example(name: str, strategy: str, out: Path) -> tuple[Path | None, list[str]]:
    """The fixed copy (or None) and why fixes were not applied."""
    from offload_fixer.fixes import apply_plans, plan_fixes
    from offload_fixer.runner import run_program

    copy = out / f"{name}.{strategy}.py"
    shutil.copyfile(ROOT / "examples" / f"{name}.py", copy)
    result = run_program(str(copy), [], target="tpu")
    if result.program_exit_code != 0:
        raise RuntimeError(f"{name} failed under the analysis:\n{result.program_exception}")
    plans = plan_fixes(result.diagnostics, strategy=strategy)
    declined: list[str] = []
    written = False
    for file_result in apply_plans(plans, write=True):
        file_result.raise_for_error()
        declined.extend(f"{plan.title}: {why}" for plan, why in file_result.skipped)
        written |= file_result.changed
    if not written:
        copy.unlink()
        return None, declined
    return copy, declined


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "examples" / "fixed")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in BROKEN:
        for strategy in STRATEGIES:
            path, declined = fix_example(name, strategy, args.out)
            shown = (path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path) if path else None
            print(f"{name} --strategy {strategy}: {shown or 'no safe fix'}")
            for why in declined:
                print(f"    declined: {why}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
