"""Speed of ``offload_fixer.static`` beside ``ruff check`` and ``fixit lint``, same tree, same run.

The tree is the ``.py`` files of the installed jax, flax and optax packages, copied to a
temporary directory outside any git repository so that no tool skips them through a
``.gitignore`` or a ``.venv`` exclusion, and ``ruff`` runs ``--isolated`` (its default rules).
``ruff`` runs twice: with its default rules and with ``--select ALL`` (every rule it has).
Every tool runs as a fresh process, start-up included, as a pre-commit hook or CI runs it.

    .venv/bin/python benchmarks/static_check.py            # medians of 5 runs, fixit once
    .venv/bin/python benchmarks/static_check.py --skip-fixit --repeat 10
    .venv/bin/python benchmarks/static_check.py --compare-jobs   # `check -j 1` against its default
    .venv/bin/python benchmarks/static_check.py --trees /work/ext/jax,/work/ext/flax,/work/ext/optax \
        /work/ext/axlearn /work/ext/maxtext --repeat 3      # real repositories, kept out of the project
    .venv-jax010/bin/python benchmarks/static_check.py --ruff .venv/bin/ruff --trees ...  # under Python 3.11

JAX's own code is written for Python 3.12 (``def f[T]()``): under 3.11 the check reads it through
a twin of each such text (``offload_fixer.source.type_parameters``), so either environment
measures it; the main one (3.12) runs the JAX that code is written for.

Targets: at least 10x faster than ``fixit lint``, no slower than ``ruff check --select ALL``.

``--trees`` takes checkouts of real repositories (their tests included; fetch them outside
this repository), each argument one tree of comma-separated directories. On each the
installed ``offload-fixer check`` runs cold (an empty result cache, which it fills) and again
with the cache it left, beside ``ruff check`` with its default rules and with ``--select ALL``,
interleaved run by run; medians of wall time and CPU seconds, and the largest peak RSS. The
trees are read where they are: every tool runs from a temporary working directory, so the
cache goes there and nothing is written into the checkouts. Targets: cold no slower than ruff's
default rules, cached at least 10x faster than cold, peak RSS at most ruff ``--select ALL``'s.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PACKAGES = ("jax", "flax", "optax")
REPO = Path(__file__).resolve().parent.parent
CHECK = """
import json, sys
from offload_fixer.static import check_paths
results = list(check_paths(sys.argv[2:], jobs=int(sys.argv[1])))
print(json.dumps({
    "files": len(results),
    "analysed": sum(r.analysed for r in results),
    "diagnostics": sum(len(r.diagnostics) for r in results),
    "parse_errors": sum(r.parse_error is not None for r in results),
}))
"""
ANALYSE_ALL = """
import json, sys
import libcst
from offload_fixer import jax_compat
from offload_fixer.static.api import _analyse
from offload_fixer.static.files import python_files
from offload_fixer.static.project import Project
spelling = jax_compat.spelling()
project = Project(sys.argv[1:])
files = size = 0
for path in python_files(sys.argv[1:]):
    text = open(path, encoding="utf-8").read()
    if "jit" in text:
        _analyse(libcst.parse_module(text), text, path, "tpu", spelling, None, project)
        files += 1
        size += len(text.encode())
print(json.dumps({"files": files, "bytes": size}))
"""


def package_dirs() -> list[Path]:
    dirs = []
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            sys.exit(f"{name} is not installed here; `.venv/bin/pip install flax optax` provides the tree")
        dirs.append(Path(next(iter(spec.submodule_search_locations))))
    return dirs


def copy_tree(sources: list[Path], destination: Path) -> tuple[int, int]:
    files = size = 0
    for source in sources:
        for path in source.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            target = destination / source.name / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            files += 1
            size += path.stat().st_size
    return files, size


def timed(command: list[str], repeat: int, cwd: Path) -> tuple[float, str]:
    times, output = [], ""
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        output = done.stdout
    return statistics.median(times), output


RUFF: str | None = None
"""``--ruff``: the ruff to compare with, where it is not installed beside this interpreter."""


def tool(name: str) -> str:
    if name == "ruff" and RUFF is not None:
        return RUFF
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        sys.exit(f"{name} is not installed beside {sys.executable} (for ruff: --ruff PATH)")
    return found


def compare_jobs(trees: dict[str, list[str]], repeat: int) -> None:
    """``offload-fixer check`` with ``-j 1``, its default and one process per core, interleaved
    run by run so that machine load falls on all three alike; medians."""
    command = [tool("offload-fixer"), "check", "--quiet", "--exit-zero"]
    variants = {"-j 1": ["-j", "1"], "default": [], f"-j {os.cpu_count()}": ["-j", str(os.cpu_count())]}
    for label, roots in trees.items():
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(repeat):
            for name, extra in variants.items():
                start = time.perf_counter()
                subprocess.run([*command, *extra, *roots], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                times[name].append(time.perf_counter() - start)
        medians = {name: statistics.median(values) for name, values in times.items()}
        cells = "  ".join(f"{name} {seconds:6.3f} s" for name, seconds in medians.items())
        print(f"{label:44s} {cells}  default / -j 1: {medians['default'] / medians['-j 1']:.2f}")


def real_trees(groups: list[str], repeat: int) -> None:
    """``--trees``: offload-fixer cold and cached beside ruff on real repositories."""
    ours = [tool("offload-fixer"), "check", "--exit-zero", "-v"]
    ruff = [tool("ruff"), "check", "--isolated", "--no-cache", "--exit-zero", "--quiet"]
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, medians of {repeat}")
    for group in groups:
        roots = [str(Path(p).resolve()) for p in group.split(",")]
        files = sum(1 for root in roots for _ in Path(root).rglob("*.py"))
        runs: dict[str, list[tuple[float, float, float]]] = {}
        share = ""
        for _ in range(repeat):
            with tempfile.TemporaryDirectory(prefix="offload-fixer-trees-") as work:
                variants = {
                    "offload-fixer check, cold": [*ours, *roots],
                    "offload-fixer check, cached": [*ours, *roots],
                    "ruff check (default rules)": [*ruff, *roots],
                    "ruff check --select ALL": [*ruff, "--select", "ALL", *roots],
                }
                for name, command in variants.items():
                    wall, cpu, rss, stderr = _timed_child(command, work)
                    runs.setdefault(name, []).append((wall, cpu, rss))
                    if name.startswith("offload-fixer"):
                        share = next((line for line in stderr.splitlines() if " analysed" in line), share)
        label = " + ".join(Path(root).name for root in roots)
        print(f"\n{label}: {files} .py files; {share.removeprefix('offload-fixer: ')}")
        print(f"{'':30s} {'wall s':>8s} {'CPU s':>8s} {'max RSS MB':>11s}   wall and CPU / ruff default, / ruff ALL")
        medians = {name: [statistics.median(v[i] for v in values) for i in (0, 1)] for name, values in runs.items()}
        peaks = {name: max(v[2] for v in values) for name, values in runs.items()}
        default, every = medians["ruff check (default rules)"], medians["ruff check --select ALL"]
        for name in runs:
            wall, cpu = medians[name]
            ratios = f"{wall / default[0]:5.2f} {cpu / default[1]:5.2f}   {wall / every[0]:5.2f} {cpu / every[1]:5.2f}"
            print(f"{name:30s} {wall:8.2f} {cpu:8.2f} {peaks[name]:11.0f}   {ratios}")
        cold, cached = medians["offload-fixer check, cold"], medians["offload-fixer check, cached"]
        print(f"cold / cached: {cold[0] / cached[0]:.1f}x wall, {cold[1] / cached[1]:.1f}x CPU (target >= 10)")


def _timed_child(command: list[str], cwd: str) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MB, stderr) of one run, CPU and RSS from ``wait4``."""
    with tempfile.TemporaryFile("w+") as errors:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=errors)
        _pid, _status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = 0
        errors.seek(0)
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, errors.read()


def offloading_tree(destination: Path, megabytes: float) -> tuple[int, int]:
    """Copies of the examples (every one offloads) up to ``megabytes``: a repository where every
    file reaches the parser, the case a pool is for."""
    sources = sorted((REPO / "examples").glob("*.py"))
    files = size = 0
    while size < megabytes * 1e6:
        for source in sources:
            shutil.copyfile(source, destination / f"{source.stem}_{files}.py")
            files += 1
            size += source.stat().st_size
    return files, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of offload-fixer and ruff (median)")
    parser.add_argument("--fixit-repeat", type=int, default=1, help="runs of fixit lint (minutes each)")
    parser.add_argument("--jobs", type=int, default=1, help="processes for the static check")
    parser.add_argument("--skip-fixit", action="store_true")
    parser.add_argument(
        "--compare-jobs",
        action="store_true",
        help="only time `offload-fixer check` with -j 1, its default and -j <cores>, on this "
        "tree and on trees where every file offloads",
    )
    parser.add_argument(
        "--trees",
        nargs="+",
        metavar="DIR[,DIR...]",
        help="real repositories to check beside ruff, cold and cached (each argument one tree)",
    )
    parser.add_argument(
        "--without-prefilter",
        action="store_true",
        help="also time parsing and analysing every file that mentions jit, as a "
        "repository where every file offloads would cost",
    )
    parser.add_argument("--ruff", help="the ruff executable (default: the one beside this interpreter)")
    args = parser.parse_args()
    global RUFF
    RUFF = os.path.abspath(args.ruff) if args.ruff else None
    if args.trees:
        real_trees(args.trees, args.repeat)
        return

    with tempfile.TemporaryDirectory(prefix="offload-fixer-bench-") as tmp:
        tree = Path(tmp)
        files, size = copy_tree(package_dirs(), tree)
        roots = [str(tree / name) for name in PACKAGES]
        print(f"tree: {files} files, {size / 1e6:.1f} MB ({', '.join(PACKAGES)}), {os.cpu_count()} CPUs")
        if args.compare_jobs:
            trees = {f"{', '.join(PACKAGES)} ({files} files)": roots}
            for megabytes in (0.3, 1.5, 3.0):
                offloading = tree / f"offloading-{megabytes}"
                offloading.mkdir()
                count, total = offloading_tree(offloading, megabytes)
                trees[f"every file offloads ({count} files, {total / 1e6:.1f} MB)"] = [str(offloading)]
            compare_jobs(trees, args.repeat)
            return

        ours, output = timed([sys.executable, "-c", CHECK, str(args.jobs), *roots], args.repeat, REPO)
        summary = json.loads(output)
        ruff, _ = timed([tool("ruff"), "check", "--isolated", "--no-cache", "--exit-zero", *roots], args.repeat, tree)
        ruff_all, _ = timed(
            [tool("ruff"), "check", "--isolated", "--no-cache", "--exit-zero", "--select", "ALL", *roots],
            args.repeat,
            tree,
        )
        rows = [("offload-fixer static check", ours), ("ruff check", ruff), ("ruff check --select ALL", ruff_all)]
        fixit = None
        if not args.skip_fixit:
            fixit, _ = timed([tool("fixit"), "lint", *roots], args.fixit_repeat, tree)
            rows.append(("fixit lint", fixit))
        if args.without_prefilter:
            full, output = timed([sys.executable, "-c", ANALYSE_ALL, *roots], 1, REPO)
            analysed = json.loads(output)

    print(
        f"static check: {summary['analysed']} files past the text prefilter, "
        f"{summary['diagnostics']} diagnostics, {summary['parse_errors']} parse errors"
    )
    for label, seconds in rows:
        print(f"{label:28s} {seconds:8.3f} s  {files / seconds:10.0f} files/s")
    print(f"ruff check / static check: {ruff / ours:.2f}x")
    print(f"ruff check --select ALL / static check: {ruff_all / ours:.2f}x (target >= 1)")
    if fixit is not None:
        print(f"fixit lint / static check: {fixit / ours:.1f}x (target >= 10)")
    if args.without_prefilter:
        print(
            f"without the prefilter: {analysed['files']} files ({analysed['bytes'] / 1e6:.1f} MB) "
            f"parsed and analysed in {full:.1f} s, {analysed['bytes'] / 1e6 / full:.2f} MB/s on one core"
        )


if __name__ == "__main__":
    main()
