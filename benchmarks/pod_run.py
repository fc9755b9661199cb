"""What a pod program costs under ``offload-fixer run --topology``, cold and cached.

Each round copies the program into a fresh directory (so nothing is kept yet) and runs
``offload-fixer run -v --topology T [--confirm] PROGRAM`` three times in fresh processes:
cold (the first run: every compilation analysed, and compiled by libtpu with ``--confirm``),
cached (the same command again: the verdicts read back) and ``--no-cache`` (what every run
cost before verdicts were kept). Prints the median wall and CPU seconds of each (user +
system of the command and every process it waited for: the program, libtpu's start-up, the
compiler process), the verdicts read, and the seconds the run spent in the cache (keying the
module, reading, keeping), as ``-v`` reports them.

    .venv/bin/python benchmarks/pod_run.py [--topology v5e-256] [--confirm] [--repeats 3] [PROGRAM]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VERDICTS = re.compile(r"(\d+) of (\d+) verdicts read from \S+ \(([\d.]+) s in the cache\)")


def command() -> list[str]:
    installed = shutil.which("offload-fixer", path=os.path.dirname(sys.executable))
    return [installed] if installed else [sys.executable, "-m", "offload_fixer"]


def timed(args: list[str], cwd: Path) -> tuple[float, float, str]:
    """Wall and CPU seconds of one command (its children included), and what it said."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", default="v5e-256")
    parser.add_argument("--confirm", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("program", nargs="?", default=str(REPO / "examples" / "pod_train.py"))
    args = parser.parse_args()
    runs: dict[str, list[tuple[float, float, str]]] = {"cold": [], "cached": [], "--no-cache": []}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="offload-fixer-pod-bench-") as scratch:
            program = Path(scratch) / Path(args.program).name
            shutil.copy(args.program, program)
            base = [*command(), "run", "-v", "--topology", args.topology, *(["--confirm"] if args.confirm else [])]
            for name, extra in (("cold", []), ("cached", []), ("--no-cache", ["--no-cache"])):
                runs[name].append(timed([*base, *extra, program.name], Path(scratch)))
    print(f"{Path(args.program).name} --topology {args.topology}{' --confirm' if args.confirm else ''}")
    print(f"{'run':<12}{'wall s':>9}{'CPU s':>9}  verdicts read (s in the cache)")
    for name, results in runs.items():
        said = [VERDICTS.search(stderr) for _, _, stderr in results]
        verdicts = ", ".join(f"{m[1]} of {m[2]} ({float(m[3]):.3f} s)" if m else "none" for m in said)
        wall = statistics.median(w for w, _, _ in results)
        cpu = statistics.median(c for _, c, _ in results)
        print(f"{name:<12}{wall:>9.1f}{cpu:>9.1f}  {verdicts}")


if __name__ == "__main__":
    main()
