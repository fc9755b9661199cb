"""One fix in a very large file: time and peak memory of ``plan_fixes`` + ``apply_plans`` for a
single finding in a generated module of ``--lines`` lines, against the peers of the same run:
CPython's ``ast.parse`` and libcst's ``parse_module`` of that file (what fixing cost per pass
when the codemods parsed and walked the whole module), and the static check that found it.

Each measurement runs in a fresh interpreter (``resource.getrusage`` peak RSS is per process),
reading the finding from a JSON file the check step wrote, so the fix's figures hold no check
state. ``--cli`` also times the installed ``offload-fixer check --fix`` end to end (check, fix,
check again).

    .venv/bin/python benchmarks/fix_large_file.py --lines 50000 --repeat 3 --cli
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = '''\
"""Generated: many helpers and one jitted step that returns a value moved to host."""
import functools

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((1,), ("data",))
host = NamedSharding(mesh, P(), memory_kind="pinned_host")
device = NamedSharding(mesh, P())
'''

HELPER = '''

def helper_{i}(params, batch):
    """Helper {i}: a small tree computation."""
    grads = jax.tree.map(lambda p: p * batch.mean(), params)
    loss = jnp.mean(batch ** 2) + {i}
    scaled = {{"loss": loss, "grads": grads}}
    return scaled
'''

BROKEN = """

@jax.jit
def offload_step(x):
    h = jax.device_put(x, host)
    return h * 2, x
"""

JAX_VERSION = "0.6.2"
"""The static check reports this program's OFL1200 under the 0.4.29 - 0.7.0 rules."""

CHILD = (
    r'''
import json, resource, sys, time  # one step in a fresh interpreter: its own time and peak RSS
step, path, data = sys.argv[1], sys.argv[2], sys.argv[3]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if step == "ast":
    import ast
    text = open(path).read()
    start = time.perf_counter(); ast.parse(text)
elif step == "libcst":
    import libcst
    text = open(path).read()
    start = time.perf_counter(); libcst.parse_module(text)
elif step == "check":
    from offload_fixer.model import Diagnostic
    from offload_fixer.static import check_paths
    start = time.perf_counter()
    found = [d for r in check_paths([path], target="tpu", jax_version="'''
    + JAX_VERSION
    + r'''", jobs=1, excludes=[])
             for d in r.diagnostics]
    json.dump([d.to_dict() for d in found], open(data, "w"))
else:
    from offload_fixer.fixes import apply_plans, plan_fixes
    from offload_fixer.model import Diagnostic
    found = [Diagnostic.from_dict(d) for d in json.load(open(data))]
    start = time.perf_counter()
    results = apply_plans(plan_fixes(found, strategy="auto", jax_version="'''
    + JAX_VERSION
    + r""""), write=True)
    assert [r.error for r in results] == [None] and results[0].written, results
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": elapsed, "peak_mb": peak / 1024, "start_mb": base / 1024}))
"""
)


def generate(lines: int) -> str:
    parts = [HEADER]
    count = HEADER.count("\n")
    index = 0
    while count < lines:
        part = HELPER.format(i=index)
        if index == 2500 or (index and count + part.count("\n") >= lines and BROKEN not in parts):
            parts.append(BROKEN)
            count += BROKEN.count("\n")
        parts.append(part)
        count += part.count("\n")
        index += 1
    if BROKEN not in parts:
        parts.append(BROKEN)
    return "".join(parts)


def measure(step: str, path: Path, data: Path) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, step, str(path), str(data)], check=True, capture_output=True, text=True, env=env
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_cli(path: Path) -> dict:
    """Wall time and the peak RSS of the command's own process (``wait4``: its rusage alone)."""
    command = [
        str(Path(sys.executable).with_name("offload-fixer")),
        "check",
        "--fix",
        "--jax-version",
        JAX_VERSION,
        "-j",
        "1",
        str(path),
    ]
    start = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "JAX_PLATFORMS": "cpu"}
    )
    _, _, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    return {"seconds": elapsed, "peak_mb": usage.ru_maxrss / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-libcst", action="store_true", help="skip the (slow) whole-file libcst parse")
    parser.add_argument("--cli", action="store_true", help="also time `offload-fixer check --fix`")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        original = Path(scratch) / "original.py"
        original.write_text(generate(args.lines))
        path, data = Path(scratch) / "big.py", Path(scratch) / "found.json"
        size = original.stat().st_size
        rows: dict[str, list[dict]] = {}
        steps = ["ast", *([] if args.skip_libcst else ["libcst"]), "check", "fix"]
        for _ in range(args.repeat):
            shutil.copyfile(original, path)
            for step in steps:
                rows.setdefault(step, []).append(measure(step, path, data))
            fixed = path.read_text()
            assert fixed != original.read_text() and fixed.count("\n") == original.read_text().count("\n")
        if args.cli:
            cli = []
            for _ in range(args.repeat):
                shutil.copyfile(original, path)
                cli.append(measure_cli(path))
            rows["cli"] = cli
    names = {
        "ast": "peer: ast.parse of the file",
        "libcst": "peer: libcst.parse_module of the file",
        "check": "static check (finds the OFL1200)",
        "fix": "plan_fixes + apply_plans (the fix)",
        "cli": "`offload-fixer check --fix` (check, fix, check)",
    }
    print(f"{args.lines:,} lines, {size / 1e6:.2f} MB; medians of {args.repeat}\n")
    print("| step | s | peak RSS MB | x ast.parse |")
    print("|---|---:|---:|---:|")
    ast_seconds = statistics.median(r["seconds"] for r in rows["ast"])
    for step, runs in rows.items():
        seconds = statistics.median(r["seconds"] for r in runs)
        peak = statistics.median(r["peak_mb"] for r in runs)
        print(f"| {names[step]} | {seconds:.2f} | {peak:.0f} | {seconds / ast_seconds:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
