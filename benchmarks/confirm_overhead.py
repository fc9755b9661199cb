"""What ``--confirm`` costs: each example run under ``offload-fixer run`` and under
``offload-fixer run --confirm`` (both targets), each in a fresh subprocess, median of 3.
Prints the wall time of both and the extra time per distinct compilation, the compilers'
start-up included (the target: under one second).

    .venv/bin/python benchmarks/confirm_overhead.py [--repeats 3] [--target tpu] [EXAMPLE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = (
    "optimizer_offload_broken",
    "param_streaming_broken",
    "unpinned_host_trap",
    "kv_cache_host",
    "activation_offload",
    "scan_stream_to_host",
)

MEASURE = """
import json, sys, time
from offload_fixer.runner import run_program
start = time.perf_counter()
result = run_program(sys.argv[1], target=sys.argv[2], confirm=sys.argv[3] == "1")
print(json.dumps({"seconds": time.perf_counter() - start, "checked": result.checked}))
"""


def measure(example: str, target: str, confirm: bool) -> tuple[float, int]:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(REPO / "examples" / f"{example}.py"), target, "1" if confirm else "0"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    data = json.loads(out.strip().splitlines()[-1])
    return data["seconds"], data["checked"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--target", action="append", choices=("tpu", "gpu"))
    parser.add_argument("examples", nargs="*", default=list(EXAMPLES))
    args = parser.parse_args()
    print(f"{'example':<28}{'target':>7}{'run s':>9}{'--confirm s':>13}{'compilations':>14}{'extra s each':>14}")
    for target in args.target or ["tpu", "gpu"]:
        for example in args.examples:
            plain = statistics.median(measure(example, target, False)[0] for _ in range(args.repeats))
            runs = [measure(example, target, True) for _ in range(args.repeats)]
            confirmed = statistics.median(seconds for seconds, _ in runs)
            checked = max(count for _, count in runs)
            extra = (confirmed - plain) / max(checked, 1)
            print(f"{example:<28}{target:>7}{plain:>9.2f}{confirmed:>13.2f}{checked:>14}{extra:>14.2f}")


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"({time.perf_counter() - started:.0f} s)")
