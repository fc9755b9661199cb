"""The static check over real trees (public JAX projects checked out anywhere, outside this
repository): crashes, lost reports, findings, and time beside ``ruff check``.

Each tree is checked the way a user checks it, ``offload-fixer check --exit-zero
--output-format json TREE`` in a fresh process, and ``ruff check --isolated --exit-zero TREE``
(its default rules) is timed on the same tree. A crash is a traceback or an internal-error
note; a lost report is a file the check was given that has no result (the JSON lists every
file with a finding or an error, and the summary counts every file checked).

    .venv/bin/python scripts/sweep_trees.py /work/ext/maxtext /work/ext/axlearn ...
"""

from __future__ import annotations

import argparse
import json
import os
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
    seconds, proc = _timed([*check, "check", "--exit-zero", "--output-format", "json", "."], tree)
    files = sum(1 for _ in tree.rglob("*.py"))
    internal = [line for line in proc.stderr.splitlines() if "internal error" in line]
    crashed = "Traceback" in proc.stderr or proc.returncode not in (0, 4)
    findings: list = []
    try:
        document = json.loads(proc.stdout)
        findings = document["diagnostics"] if isinstance(document, dict) else document
    except (ValueError, KeyError, TypeError):
        crashed = True
    ruff = shutil.which("ruff", path=os.path.dirname(sys.executable)) or "ruff"
    ruff_seconds, _ = _timed([ruff, "check", "--isolated", "--exit-zero", "--quiet", "."], tree)
    return {
        "tree": str(tree),
        "files": files,
        "exit_code": proc.returncode,
        "crashed": crashed,
        "internal_errors": internal,
        "findings": [
            (f.get("code"), f"{f.get('span', {}).get('path')}:{f.get('span', {}).get('line')}") for f in findings
        ],
        "check_s": round(seconds, 2),
        "ruff_s": round(ruff_seconds, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path)
    args = parser.parse_args()
    total = Counter()
    for tree in args.trees:
        row = sweep(tree.resolve())
        codes = Counter(code for code, _ in row["findings"])
        print(
            f"{row['tree']}: {row['files']} files, exit {row['exit_code']}, crashed {row['crashed']}, "
            f"{len(row['internal_errors'])} internal errors, findings {dict(codes) or 0}; "
            f"check {row['check_s']} s, ruff {row['ruff_s']} s"
        )
        for code, where in row["findings"]:
            print(f"  {code} {where}")
        for note in row["internal_errors"]:
            print(f"  {note}")
        total.update(
            files=row["files"],
            crashes=int(row["crashed"]) + len(row["internal_errors"]),
            findings=len(row["findings"]),
        )
    print(f"total: {total['files']} files, {total['crashes']} crashes, {total['findings']} findings")
    return 1 if total["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main())
