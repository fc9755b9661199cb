"""How many findings get a fix ``--fix`` can apply, over the examples and the test programs.

The findings: the dynamic analysis (as ``offload-fixer run`` does) of every program in
``examples/``, of the training packages in ``examples/training/`` (run as modules), of the
before/after programs in ``tests/fixes/programs/`` and of every rule page's invalid example
(``offload-fixer rules CODE``), and the static check (``offload-fixer check``) of all of those,
of the example notebooks and of ``tests/lsp_fixtures/``. Each finding of a fixable code counts
as fixed by a strategy when that strategy's plan for it has a safe edit (``--fix``) or an
unsafe one (``--unsafe-fixes``); ``display-only`` when no edit is possible.

    .venv/bin/python scripts/fix_coverage.py            # the table, for the installed JAX
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

from offload_fixer.model import STRATEGIES

ROOT = Path(__file__).resolve().parent.parent
_names = itertools.count()


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"_coverage_{next(_names)}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _run_package(name: str, cwd: Path):
    """``offload-fixer run -m examples.training.NAME`` from ``cwd``, in this process (its
    modules forgotten afterwards)."""
    from offload_fixer.runner import run_program

    previous = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return run_program(f"examples.training.{name}", [], target="tpu", is_module=True)
    finally:
        os.chdir(previous)
        for module in [m for m in sys.modules if m == "examples" or m.startswith("examples.")]:
            del sys.modules[module]


def findings(scratch: Path) -> list[tuple[str, list]]:
    """(source label, reports or diagnostics) for every program, analysed in a scratch copy."""
    from offload_fixer import jax_compat
    from offload_fixer.api import check
    from offload_fixer.rules import all_rules
    from offload_fixer.runner import run_program
    from offload_fixer.static import check_paths

    found: list[tuple[str, list]] = []
    static_paths = []
    for example in sorted((ROOT / "examples").glob("*.py")):
        copy = scratch / "examples" / example.name
        copy.parent.mkdir(exist_ok=True)
        shutil.copyfile(example, copy)
        with contextlib.redirect_stdout(io.StringIO()):
            result = run_program(str(copy), [], target="tpu")
        found.append((f"examples/{example.name} (run)", list(result.reports)))
        static_paths.append(copy)
    shutil.copytree(ROOT / "examples" / "training", scratch / "training" / "examples" / "training")
    for package in sorted((scratch / "training" / "examples" / "training").glob("*/__main__.py")):
        found.append(
            (
                f"examples/training/{package.parent.name} (run)",
                list(_run_package(package.parent.name, scratch / "training").reports),
            )
        )
    static_paths.append(scratch / "training" / "examples" / "training")
    for notebook in sorted((ROOT / "examples").glob("*.ipynb")):
        copy = scratch / "examples" / notebook.name
        shutil.copyfile(notebook, copy)
        static_paths.append(copy)
    programs = ROOT / "tests" / "fixes" / "programs"
    regime = jax_compat.regime().name
    for program in sorted(p for p in programs.glob("*.py") if not p.stem.endswith(".after")):
        text = program.read_text()
        if f'"{regime}"' not in text.split("REGIMES = (", 1)[-1].split(")", 1)[0]:
            continue
        copy = scratch / "programs" / program.name
        copy.parent.mkdir(exist_ok=True)
        shutil.copyfile(program, copy)
        module = _load(copy)
        found.append(
            (f"tests/fixes/programs/{program.name} (run)", [check(module.entry, *module.abstract_args(), target="tpu")])
        )
        static_paths.append(copy)
    for rule in all_rules():
        if rule.judged_by_jax:
            continue  # its examples are refused by JAX: nothing to fix or lower
        copy = scratch / "rules" / f"{rule.code.lower()}_invalid.py"
        copy.parent.mkdir(exist_ok=True)
        copy.write_text(rule.invalid_example())
        try:
            module = _load(copy)
            report = check(module.f, *module.args, target="tpu")
        except Exception as exc:  # noqa: BLE001 - an example this JAX cannot build (no pinned_host memory on its CPU)
            print(f"  (rules {rule.code}: not analysed here: {type(exc).__name__})", file=sys.stderr)
            continue
        found.append((f"rules {rule.code} invalid example (run)", [report]))
        static_paths.append(copy)
    for fixture in sorted((ROOT / "tests" / "lsp_fixtures").glob("*.py")):
        copy = scratch / "lsp" / fixture.name
        copy.parent.mkdir(exist_ok=True)
        shutil.copyfile(fixture, copy)
        static_paths.append(copy)
    for result in check_paths([str(p) for p in static_paths], target="tpu", jobs=1, excludes=[]):
        if result.diagnostics:
            label = os.path.relpath(result.path, scratch)
            found.append((f"{label.removeprefix('training' + os.sep)} (check)", list(result.diagnostics)))
    return found


def main() -> int:
    from offload_fixer import jax_compat
    from offload_fixer.fixes import FIXABLE_CODES, plan_fixes

    counts: Counter = Counter()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for label, items in findings(Path(scratch)):
            diagnostics = [d for item in items for d in getattr(item, "diagnostics", [item])]
            fixable = [d for d in diagnostics if d.code in FIXABLE_CODES]
            if not fixable:
                continue
            by_strategy = {s: plan_fixes(items, strategy=s) for s in STRATEGIES}
            for d in fixable:
                labels = []
                for strategy in STRATEGIES:
                    safety = next(
                        (p.safety for p in by_strategy[strategy] if d in p.covered and p.edits), "display-only"
                    )
                    counts[(d.code, strategy, safety)] += 1
                    labels.append(safety)
                counts[(d.code, "total")] += 1
                rows.append((label, d.code, d.output_path, labels))
    print(f"JAX {jax_compat.installed_version()}: fixable findings and the fix each strategy applies\n")
    print("| code | findings | " + " | ".join(f"{s}: safe / unsafe / none" for s in STRATEGIES) + " |")
    print("|---|---:|" + "---:|" * len(STRATEGIES))
    for code in FIXABLE_CODES:
        total = counts[(code, "total")]
        if not total:
            continue
        cells = [" / ".join(str(counts[(code, s, k)]) for k in ("safe", "unsafe", "display-only")) for s in STRATEGIES]
        print(f"| {code} | {total} | " + " | ".join(cells) + " |")
    print("\nper finding (auto, device, host):")
    for label, code, path, labels in rows:
        print(f"  {label}: {code} {path or ''} -> {', '.join(labels)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
