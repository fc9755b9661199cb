"""Fixing throughput: files per second through plan_fixes + apply_plans, against plain libcst
parse + codegen (and parse + positions) of the same files in the same run.

Generates ``--files`` modules, each with ``--functions`` jitted functions that return a
value moved to host (decorated and ``jax.jit(f, ...)`` sites, tuple and dict returns), builds
one OFL1200 diagnostic per function, and times planning and applying both fixes (device: a
move at the return; host: an ``out_shardings`` edit) with writes to a scratch directory. Each
figure is the median of ``--repeat`` runs.

    .venv/bin/python benchmarks/fix_throughput.py --files 200 --functions 8
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from offload_fixer.fixes import apply_plans, plan_fixes
from offload_fixer.model import Diagnostic, FunctionRef, Origin, Span

HEADER = '''\
"""Generated training helpers."""
import functools

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((1,), ("data",))
host = NamedSharding(mesh, P(), memory_kind="pinned_host")
device = NamedSharding(mesh, P())
'''

DECORATED = '''

@functools.partial(jax.jit, donate_argnums=0)
def step_{i}(params, batch):
    """Step {i}: keep a host copy of the update."""
    grads = jax.tree.map(lambda p: p * batch.mean(), params)
    saved = jax.device_put(grads, host)  # offloaded
    loss = jnp.mean(batch ** 2) + {i}
    return {{"loss": loss, "saved": saved, "params": params}}
'''

CALLED = """

def update_{i}(x, y):
    h = jax.device_put(x * {i}, host)
    z = jnp.tanh(y)
    return z, h


update_{i}_jit = jax.jit(update_{i}, in_shardings=(device, device))
"""


def generate(directory: Path, files: int, functions: int) -> list[Diagnostic]:
    diagnostics = []
    for n in range(files):
        text = HEADER
        path = directory / f"module_{n}.py"
        for i in range(functions):
            template, output = (DECORATED, "['saved']") if i % 2 == 0 else (CALLED, "[1]")
            first = text.count("\n") + 2
            block = template.format(i=i)
            offset = next(k for k, line in enumerate(block.splitlines()) if "device_put" in line)
            def_line = first + (1 if template is DECORATED else 0)
            origin = Origin("move_to_host", "pinned_host", Span(str(path), first + offset - 1, 5), key=f"{path}:{i}")
            diagnostics.append(
                Diagnostic(
                    "OFL1200",
                    "error",
                    "tpu",
                    "host value reaches a device output",
                    "",
                    output_path=output,
                    origin=origin,
                    function=FunctionRef(f"{'step' if template is DECORATED else 'update'}_{i}", str(path), def_line),
                )
            )
            text += block
        path.write_text(text)
    return diagnostics


def median_time(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--functions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        source_dir = Path(scratch) / "src"
        source_dir.mkdir()
        diagnostics = generate(source_dir, args.files, args.functions)
        paths = sorted(source_dir.glob("*.py"))
        originals = {path: path.read_bytes() for path in paths}
        size = sum(len(data) for data in originals.values())

        def restore() -> None:
            for path, data in originals.items():
                path.write_bytes(data)

        def parse_codegen() -> None:
            for data in originals.values():
                assert cst.parse_module(data).bytes == data

        def parse_positions() -> None:
            for data in originals.values():
                MetadataWrapper(cst.parse_module(data)).resolve(PositionProvider)

        def fix(strategy: str):
            def run() -> None:
                restore()
                results = apply_plans(plan_fixes(diagnostics, strategy=strategy, jax_version="0.10.2"), write=True)
                assert all(r.written and r.error is None for r in results), results[0]

            return run

        baseline = median_time(parse_codegen, args.repeat)
        positions = median_time(parse_positions, args.repeat)
        print(f"{args.files} files, {args.functions} functions each, {size / 1e6:.2f} MB")
        print(f"{'operation':<34}{'s':>8}{'files/s':>10}{'x parse+codegen':>17}")
        for name, seconds in [
            ("libcst parse + codegen", baseline),
            ("libcst parse + positions", positions),
            ("fix (device: move at return)", median_time(fix("device"), args.repeat)),
            ("fix (host: out_shardings)", median_time(fix("host"), args.repeat)),
        ]:
            print(f"{name:<34}{seconds:>8.2f}{args.files / seconds:>10.1f}{seconds / baseline:>17.1f}")


if __name__ == "__main__":
    main()
