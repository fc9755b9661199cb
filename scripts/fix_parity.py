"""Whether ``check --fix`` and ``run --fix`` write the same fix for the same finding (issue 22, item 6).

Over the programs where both engines find the same OFL1200 outputs (the static check from the
source, ``run`` from the lowered program), each program's text after ``check``'s safe plans is
compared with its text after ``run``'s. A program where they differ is counted ``unsafe`` when
``check`` labelled a plan unsafe (not written without ``--unsafe-fixes``: the static check could
not tell what ``run`` saw), and ``differ`` otherwise: a safe static fix that is not the one
``run`` writes, which must not happen. The editor (``plan_on_text`` on the buffer) is compared
with ``check``.

    .venv/bin/python scripts/fix_parity.py            # tests/static_vs_dynamic, tests/fixes/quality, examples
    .venv/bin/python scripts/fix_parity.py PROG.py... # any programs that run

Exit status 1 when a program is ``differ``, or the editor and ``check`` disagree.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import os
import sys
from pathlib import Path

# The corpus meshes have 4 and 8 devices: CPU devices, set before JAX starts.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

ROOT = Path(__file__).resolve().parent.parent
GLOBS = ("tests/static_vs_dynamic/*.py", "tests/fixes/quality/*.py", "examples/*.py")


def _found(diagnostics: list) -> list[tuple[str, str]]:
    return sorted(
        {(d.function.name if d.function else "", d.output_path or "") for d in diagnostics if d.code == "OFL1200"}
    )


def compare(path: Path, show_diff: bool = False) -> tuple[str, str]:
    """(verdict, detail) for one program: ``skip`` (the engines find different outputs, or none),
    ``same``, ``unsafe`` or ``differ``; ``show_diff`` adds check's text against run's to a
    ``differ`` or ``unsafe`` detail."""
    from offload_fixer.config import Settings
    from offload_fixer.fixes import plan_fixes
    from offload_fixer.fixes.apply import apply_to_source
    from offload_fixer.lsp.engine import plan_on_text
    from offload_fixer.runner import run_program
    from offload_fixer.static.api import check_source

    data = path.read_bytes()
    cwd = os.getcwd()
    sys.path.insert(0, str(path.parent))  # the corpus programs import their helpers
    try:
        os.chdir(path.parent)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            reports = run_program(str(path), [], target="tpu").reports
    except Exception as exc:  # noqa: BLE001  (a program that does not run is not compared)
        return "skip", f"does not run ({type(exc).__name__})"
    finally:
        os.chdir(cwd)
        sys.path.remove(str(path.parent))
    static = list(check_source(data, str(path)).diagnostics)
    found = _found(static)
    if not found or found != _found([d for r in reports for d in r.diagnostics]):
        return "skip", "the engines find different OFL1200 outputs"

    def text(plans: list) -> str | None:
        fixed = apply_to_source(str(path), data, plans)
        return fixed.new_text if fixed.changed else None

    run_plans = plan_fixes(reports, "auto")
    check_plans = plan_fixes(static, "auto")
    editor_plans = plan_on_text(static, data.decode(), str(path), "auto", Settings())
    ran, checked = text(run_plans), text(check_plans)
    if text(editor_plans) != checked:
        return "differ", "the editor and check write different fixes"
    if checked == ran:
        return "same", "no fix" if ran is None else ""
    diff = ""
    if show_diff:
        original = data.decode()
        lines = difflib.unified_diff(
            (checked or original).splitlines(True), (ran or original).splitlines(True), "check", "run", n=1
        )
        diff = "\n" + "".join(lines)
    reasons = [r for p in check_plans if p.safety == "unsafe" for r in p.unsafe_reasons]
    if reasons:
        return "unsafe", "; ".join(dict.fromkeys(reasons)) + diff
    return "differ", "check writes a safe fix that is not run's" + diff


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", type=Path)
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per program")
    parser.add_argument("--diff", action="store_true", help="check's fix against run's where they differ")
    args = parser.parse_args(argv)
    programs = [p.resolve() for p in args.programs] or sorted(p for g in GLOBS for p in ROOT.glob(g))
    verdicts: dict[str, list[tuple[str, str]]] = {"same": [], "unsafe": [], "differ": [], "skip": []}
    for program in programs:
        verdict, detail = compare(program, args.diff)
        name = str(program.relative_to(ROOT)) if program.is_relative_to(ROOT) else str(program)
        verdicts[verdict].append((name, detail))
        if args.verbose:
            print(f"{verdict:6} {name}{': ' + detail if detail else ''}", flush=True)
    compared = len(programs) - len(verdicts["skip"])
    print(f"same fix for {len(verdicts['same'])} of {compared} programs", end="")
    print(f" ({sum(1 for _, d in verdicts['same'] if d == 'no fix')} with no fix from either)", end="")
    print(f"; {len(verdicts['unsafe'])} unsafe in check; {len(verdicts['differ'])} differ")
    for verdict in ("unsafe", "differ"):
        for name, detail in verdicts[verdict]:
            print(f"  {verdict}: {name}: {detail}")
    return 1 if verdicts["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
