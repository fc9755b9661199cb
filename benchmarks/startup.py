"""Start-up of ``offload-fixer`` beside ``ruff``: CPU seconds of one-file commands, same run.

Each command runs as a fresh process, as a pre-commit hook or an editor's save runs it, and its
CPU time (user + system, from ``wait4``) and peak RSS are read from the kernel, so a loaded
machine stretches the wall time but hardly the CPU figure. The commands run interleaved, round
by round, so the load falls on all alike; medians and minima are printed (on a busy machine
the minimum is the steadier figure). Python's bytecode cache is
allowed (``PYTHONDONTWRITEBYTECODE`` is dropped from the environment) and warmed by one
untimed round, as an installed tool has it; that round also fills offload-fixer's result
cache, which the ``(cached)`` rows read and the ``--no-cache`` rows neither read nor write.

    .venv/bin/python benchmarks/startup.py --repeat 10
    .venv/bin/python benchmarks/startup.py --imports   # also: which modules `check` loads
    .venv/bin/python benchmarks/startup.py --baseline ../main   # before and after, in one run

The files: a clean module (no jit, what most files of a project are); a jitted function that
moves a value to host and back (parsed with libcst and analysed, no finding); and
``examples/param_streaming_broken.py`` (an OFL1200, whose fix is planned to mark it ``[*]``).
Target: a one-file ``check`` of the clean module in at most 0.15 s of CPU.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CLEAN = '''"""Utilities for reading a configuration."""

import json
from pathlib import Path


def load(path: Path) -> dict:
    with path.open() as handle:
        return json.load(handle)


def merged(*configs: dict) -> dict:
    out: dict = {}
    for config in configs:
        out.update(config)
    return out
'''

JITTED = """import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    y = jax.device_put(jnp.sin(x), jax.memory.Space.Host)
    return jax.device_put(y * 2, jax.memory.Space.Device)
"""
REPO = Path(__file__).resolve().parent.parent
BROKEN = REPO / "examples" / "param_streaming_broken.py"


def tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        sys.exit(f"{name} is not installed beside {sys.executable}")
    return found


def console_script(tree: Path) -> list[str]:
    """What the installed ``offload-fixer`` of another checkout runs: its ``[project.scripts]``
    entry, called as the console script calls it (the installed one is this checkout's)."""
    import tomllib

    target = tomllib.loads((tree / "pyproject.toml").read_text())["project"]["scripts"]["offload-fixer"]
    module, function = target.split(":")
    launcher = f"import sys; from {module} import {function}; sys.exit({function}())"
    return [sys.executable, "-c", launcher]


def measured(command: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, peak RSS in MB) of one run of ``command``."""
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, _status, usage = os.wait4(process.pid, 0)
    process.returncode = 0
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def imported_modules(command: list[str], cwd: str, env: dict[str, str]) -> list[str]:
    """The modules ``command`` (a Python entry point) imports, from ``-X importtime``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *command], cwd=cwd, env=env, capture_output=True, text=True
    )
    return [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")][1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10, help="rounds (medians)")
    parser.add_argument("--imports", action="store_true", help="list what `check` of the clean file imports")
    parser.add_argument(
        "--baseline",
        metavar="CHECKOUT",
        help="also run offload-fixer from this checkout (PYTHONPATH), interleaved: before and after in one run",
    )
    args = parser.parse_args()

    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    trees = {"": env}
    launchers = {"": [tool("offload-fixer")]}
    if args.baseline:
        trees[" [baseline]"] = {**env, "PYTHONPATH": str(Path(args.baseline).resolve())}
        launchers[" [baseline]"] = console_script(Path(args.baseline))
    ruff = tool("ruff")
    with tempfile.TemporaryDirectory(prefix="offload-fixer-startup-") as tmp:
        # Each tree checks its own copy of the files, so that each has its own result cache
        # (``.offload-fixer-cache/`` in the working directory): a shared one would let a
        # tree's "(cached)" rows read what the other tree's runs wrote.
        places = {suffix: Path(tmp, f"tree{number}") for number, suffix in enumerate(trees)}
        for place in places.values():
            place.mkdir()
            Path(place, "clean.py").write_text(CLEAN)
            Path(place, "jitted.py").write_text(JITTED)
            shutil.copyfile(BROKEN, Path(place, "broken.py"))
        first = str(places[""])
        commands: dict[str, tuple[list[str], dict[str, str], str]] = {
            "python -c pass (the floor)": ([sys.executable, "-c", "pass"], env, first),
            "ruff --version": ([ruff, "--version"], env, first),
        }
        for file in ("clean.py", "jitted.py", "broken.py"):
            commands[f"ruff check {file}"] = ([ruff, "check", "--isolated", "--no-cache", file], env, first)
        for suffix, tree_env in trees.items():
            where = str(places[suffix])
            ours = launchers[suffix]
            cache = (
                "--no-cache"
                in subprocess.run([*ours, "check", "--help"], capture_output=True, text=True, env=tree_env).stdout
            )
            commands[f"offload-fixer --version{suffix}"] = ([*ours, "--version"], tree_env, where)
            commands[f"offload-fixer check clean.py{suffix}"] = ([*ours, "check", "clean.py"], tree_env, where)
            for file in ("jitted.py", "broken.py"):
                cold = [*ours, "check", "--no-cache", file] if cache else [*ours, "check", file]
                commands[f"offload-fixer check --no-cache {file}{suffix}"] = (cold, tree_env, where)
                if cache:  # a version before the cache has no cached run
                    commands[f"offload-fixer check {file} (cached){suffix}"] = ([*ours, "check", file], tree_env, where)
        for command, command_env, cwd in commands.values():  # warm the bytecode cache (and the result cache)
            measured(command, cwd, command_env)
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        rss: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, (command, command_env, cwd) in commands.items():
                seconds, megabytes = measured(command, cwd, command_env)
                cpu[name].append(seconds)
                rss[name].append(megabytes)
        if args.imports:
            modules = imported_modules([*launchers[""], "check", "clean.py"], first, env)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, {args.repeat} rounds")
    print(f"{'command':54s} {'CPU s median':>12s} {'min':>6s} {'max RSS MB':>11s} {'x ruff':>7s}")
    for name in sorted(commands, key=_row_order):
        file = next((f for f in ("clean.py", "jitted.py", "broken.py") if f in name), None)
        peer = cpu[f"ruff check {file}"] if file and name.startswith("offload-fixer") else None
        ratio = f"{statistics.median(cpu[name]) / statistics.median(peer):7.1f}" if peer else ""
        print(
            f"{name:54s} {statistics.median(cpu[name]):12.3f} {min(cpu[name]):6.3f} "
            f"{statistics.median(rss[name]):11.1f} {ratio}"
        )
    clean = statistics.median(cpu["offload-fixer check clean.py"])
    print(f"target: check clean.py <= 0.150 s CPU: {clean:.3f} s")
    if args.imports:
        ours_only = sorted({module.split(".")[0] for module in modules} - set(sys.stdlib_module_names))
        print(f"`check clean.py` imports {len(modules)} modules; outside the standard library: {', '.join(ours_only)}")


def _row_order(name: str) -> tuple[int, str]:
    """The floor and --version first, then each file's rows together."""
    for rank, word in enumerate(("python", "--version", "clean.py", "jitted.py", "broken.py")):
        if word in name:
            return rank, name
    return 9, name


if __name__ == "__main__":
    main()
