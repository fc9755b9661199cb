"""A symlink swapped in while a fix runs: a fix writes inside the project or nowhere.

Each run fixes ``proj/src/train.py`` (``check --fix``, or ``fix REPORT`` of a report naming
it) while ``outside/`` beside the project holds files with the very same bytes, so the guard
on the analysed bytes cannot tell them apart. During the run, ``src/train.py`` (the file) or
``src/`` (its directory) is replaced by a symlink into ``outside/``:

* ``before the write``: once, after the fix was planned and its path checked, just before
  the write (the window the scope check and the write left open);
* ``inside the write``: once, after the write resolved the path and before it opens it;
* ``racing``: back and forth for the whole run, from another thread, at random moments.

What must hold: no byte outside the project changes; nothing raises; a swap just before the write is
or inside it is
refused (exit 5, naming the file); a racing one ends fixed (0), unfixed (1: the walk left a
swapped directory alone), with the file gone for a moment (4) or refused (5, naming it). Where
nothing races after the write, a run that says it fixed the file leaves the project's file
holding the fix (racing, the swapper's own rename back may put the old file over it).
"""

from __future__ import annotations

import os
import random
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from offload_fixer.exit_codes import ExitCode

from .bad_input import FIXABLE, OLD, _report_record

MODES = (
    "file, before the write",
    "directory, before the write",
    "file, inside the write",
    "directory, inside the write",
    "file, racing",
    "directory, racing",
)
COMMANDS = ("check --fix", "fix REPORT")
EXPECTED_BEFORE = (ExitCode.FIX_REFUSED,)
"""A swap just before the write always leaves the project: the write is refused."""
EXPECTED_RACING = (ExitCode.CLEAN, ExitCode.FINDINGS, ExitCode.INPUT_ERROR, ExitCode.FIX_REFUSED)
"""Racing: fixed, or found nothing to fix (the walk does not follow a swapped-in symlink), or
found the file gone for a moment (said, exit 4), or refused the write."""
RACE_FAILURES = ("traceback", "write outside", "wrong exit code", "unnamed refusal", "claimed fix")


@dataclass
class Race:
    mode: str
    command: str
    problems: list[str] = field(default_factory=list)
    refused: bool = False


class Swapper:
    """Replaces ``path`` (a file or a directory) by a symlink to ``target`` and back, each
    time with one ``rename``, as an attacker with write access to the project would."""

    def __init__(self, path: Path, target: Path) -> None:
        self.path = path
        self.target = target
        self.aside = path.with_name(f".{path.name}.aside")
        self.link = path.with_name(f".{path.name}.link")
        self.swapped = False

    def swap(self) -> None:
        if self.swapped:
            return
        os.symlink(self.target, self.link)
        os.rename(self.path, self.aside)
        os.rename(self.link, self.path)  # a directory's name is free again: rename takes it
        self.swapped = True

    def restore(self) -> None:
        if not self.swapped:
            return
        os.unlink(self.path)
        os.rename(self.aside, self.path)
        self.swapped = False


def _project(directory: Path) -> tuple[Path, Path]:
    project = directory / "proj"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (project / "src" / "train.py").write_text(FIXABLE)
    outside = directory / "outside"
    (outside / "src").mkdir(parents=True)
    (outside / "train.py").write_text(FIXABLE)
    (outside / "src" / "train.py").write_text(FIXABLE)
    return project, outside


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()
    }


@contextmanager
def _before_each_write(action) -> Iterator[None]:
    """``action()`` just before the fixer's write of a file, after everything before it."""
    from offload_fixer.fixes import apply as fix_apply

    write_source = fix_apply.write_source

    def swapped_first(*args, **kwargs) -> None:
        action()
        write_source(*args, **kwargs)

    fix_apply.write_source = swapped_first
    try:
        yield
    finally:
        fix_apply.write_source = write_source


@contextmanager
def _inside_each_write(action) -> Iterator[None]:
    """``action()`` inside the fixer's write, once it resolved the path, before it opens it."""
    from offload_fixer.fixes import writing

    directory = writing.Directory

    def swapped_first(real: str):
        action()
        return directory(real)

    writing.Directory = swapped_first  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        writing.Directory = directory  # type: ignore[misc]


def race_once(directory: Path, rng: random.Random, mode: str | None = None, command: str | None = None) -> Race:
    """One run in ``directory`` (fresh), its mode and command drawn from ``rng`` unless given."""
    from click.testing import CliRunner

    from offload_fixer.cli import main

    race = Race(mode or rng.choice(MODES), command or rng.choice(COMMANDS))
    project, outside = _project(directory)
    if race.mode.startswith("file"):
        swapper = Swapper(project / "src" / "train.py", outside / "train.py")
    else:
        swapper = Swapper(project / "src", outside / "src")
    if race.command == "fix REPORT":
        import hashlib
        import json

        digest = hashlib.sha256(FIXABLE.encode()).hexdigest()
        (project / "report.json").write_text(json.dumps(_report_record("src/train.py", {"src/train.py": digest})))
        arguments = ["fix", "--unsafe-fixes", "report.json"]
    else:
        arguments = ["check", "--fix", "--unsafe-fixes", "--no-cache", "--jax-version", OLD, "."]
    outside_before = _snapshot(outside)
    stop = threading.Event()

    def toggle() -> None:
        while not stop.is_set():
            time.sleep(rng.uniform(0, 0.004))
            try:
                swapper.restore() if swapper.swapped else swapper.swap()
            except OSError:  # the fixer renamed the file at that moment: try again
                pass

    cwd = os.getcwd()
    os.chdir(project)
    racer = threading.Thread(target=toggle, daemon=True) if race.mode.endswith("racing") else None
    try:
        if racer is not None:
            racer.start()
            result = CliRunner().invoke(main, arguments)
        else:
            hook = _before_each_write if race.mode.endswith("before the write") else _inside_each_write
            with hook(swapper.swap):
                result = CliRunner().invoke(main, arguments)
    finally:
        stop.set()
        if racer is not None:
            racer.join()
        swapper.restore()
        os.chdir(cwd)
    output = result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        race.problems.append("traceback: " + "".join(traceback.format_exception(result.exception))[-2000:])
    if _snapshot(outside) != outside_before:
        race.problems.append(f"write outside: a file outside the project changed\n{output[-1500:]}")
    if result.exit_code not in (EXPECTED_RACING if race.mode.endswith("racing") else EXPECTED_BEFORE):
        race.problems.append(f"wrong exit code: {result.exit_code}\n{output[-1500:]}")
    race.refused = result.exit_code == ExitCode.FIX_REFUSED
    if race.refused and "train.py: fix refused" not in output:
        race.problems.append(f"unnamed refusal: the refusal does not name the file\n{output[-1500:]}")
    fixed = "out_shardings" in (project / "src" / "train.py").read_text()
    # racing, the swapper's own rename back may replace what the fix wrote: judged alone
    if not race.mode.endswith("racing") and ("1 fixed" in output or "train.py: fixed" in output) and not fixed:
        race.problems.append(f"claimed fix: the run says it fixed the file, which holds no fix\n{output[-1500:]}")
    return race


def run_races(count: int, seed: int, directory: Path) -> tuple[Counter, list[str]]:
    """``count`` races, the modes and commands in turn (so every pair runs), seeded."""
    rng = random.Random(seed)
    counts: Counter = Counter()
    details = []
    pairs = [(mode, command) for mode in MODES for command in COMMANDS]
    for index in range(count):
        mode, command = pairs[index % len(pairs)]
        case = directory / f"race{index:04d}"
        case.mkdir()
        race = race_once(case, rng, mode, command)
        counts[f"{mode} ({command}) runs"] += 1
        counts["runs refused (exit 5)"] += race.refused
        counts["runs fixed in the project (exit 0)"] += not race.refused and not race.problems
        for problem in race.problems:
            counts[problem.split(":", 1)[0]] += 1
            details.append(f"{mode} ({command}): {problem}")
    return counts, details
