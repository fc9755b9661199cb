"""The static check over real trees (public JAX projects checked out anywhere, outside this
repository): crashes, lost reports, findings, and time beside ``ruff check``.

Each tree is checked the way a user checks it, ``offload-fixer check --exit-zero
--output-format json TREE`` in a fresh process, and ``ruff check --isolated --exit-zero TREE``
(its default rules) is timed on the same tree. A crash is a traceback or an internal-error
note; a lost report is a file the check was given that it could not check (a file error in
the JSON). Each finding is printed with what classifying it needs: the function, the origin
and the message. Both tools run without their caches, so nothing is written into the trees.

    .venv/bin/python scripts/sweep_trees.py /work/ext/maxtext /work/ext/axlearn ...
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _timed(command: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, proc


def sweep(tree: Path) -> dict:
    exe = shutil.which("offload-fixer", path=os.path.dirname(sys.executable))
    check = [exe] if exe else [sys.executable, "-m", "offload_fixer"]
    command = [*check, "check", "--no-cache", "-v", "--exit-zero", "--output-format", "json", "."]
    seconds, proc = _timed(command, tree)
    files = sum(1 for path in tree.rglob("*") if path.suffix in (".py", ".ipynb"))
    internal = [line for line in proc.stderr.splitlines() if "internal error" in line]
    crashed = "Traceback" in proc.stderr or proc.returncode not in (0, 4)
    counted = re.search(r"(\d+) files: (\d+) analysed", proc.stderr)
    findings: list = []
    file_errors: list = []
    try:
        document = json.loads(proc.stdout)
        findings = document["diagnostics"] if isinstance(document, dict) else document
        file_errors = document.get("file_errors", []) if isinstance(document, dict) else []
    except (ValueError, KeyError, TypeError):
        crashed = True
    ruff = shutil.which("ruff", path=os.path.dirname(sys.executable)) or "ruff"
    ruff_seconds, _ = _timed([ruff, "check", "--isolated", "--no-cache", "--exit-zero", "--quiet", "."], tree)
    return {
        "tree": str(tree),
        "files": files,
        "checked": int(counted.group(1)) if counted else None,
        "analysed": int(counted.group(2)) if counted else None,
        "exit_code": proc.returncode,
        "crashed": crashed,
        "internal_errors": internal,
        "lost": [f"{e.get('path')}:{e.get('line')}: {e.get('message')}" for e in file_errors],
        "findings": [_finding(f) for f in findings],
        "check_s": round(seconds, 2),
        "ruff_s": round(ruff_seconds, 2),
    }


def _finding(d: dict) -> tuple[str, str, str]:
    """(code, where, what a reader needs to classify it: the function, the origin, the message)."""
    span = d.get("span") or {}
    origin = d.get("origin") or {}
    origin_span = origin.get("span") or {}
    function = (d.get("function") or {}).get("name")
    message = " ".join(str(d.get("message", "")).split())[:110]
    inputs = f"in {function}; origin {origin.get('detail')} at line {origin_span.get('line')}; {message}"
    return d.get("code"), f"{span.get('path')}:{span.get('line')}", inputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path)
    args = parser.parse_args()
    total: Counter = Counter()
    for tree in args.trees:
        row = sweep(tree.resolve())
        codes = Counter(code for code, _, _ in row["findings"])
        print(
            f"{row['tree']}: {row['files']} files ({row['checked']} checked, {row['analysed']} analysed), "
            f"exit {row['exit_code']}, crashed {row['crashed']}, {len(row['internal_errors'])} internal errors, "
            f"{len(row['lost'])} lost reports, findings {dict(codes) or 0}; "
            f"check {row['check_s']} s, ruff {row['ruff_s']} s"
        )
        for code, where, inputs in row["findings"]:
            print(f"  {code} {where}: {inputs}")
        for note in [*row["internal_errors"], *row["lost"]]:
            print(f"  {note}")
        total.update(
            files=row["files"],
            analysed=row["analysed"] or 0,
            crashes=int(row["crashed"]) + len(row["internal_errors"]),
            lost=len(row["lost"]),
            findings=len(row["findings"]),
            check_s=row["check_s"],
            ruff_s=row["ruff_s"],
        )
    print(
        f"total: {total['files']} files, {total['analysed']} analysed, {total['crashes']} crashes, "
        f"{total['lost']} lost reports, {total['findings']} findings; "
        f"check {total['check_s']:.1f} s, ruff {total['ruff_s']:.1f} s"
    )
    return 1 if total["crashes"] or total["lost"] else 0


if __name__ == "__main__":
    sys.exit(main())
