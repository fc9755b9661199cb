"""Interrupted ``check --fix`` runs: a many-file fix stopped by SIGINT, SIGTERM or SIGKILL at a
random point leaves every file as it was or fully fixed, never in between.

A first run, uninterrupted, gives each file's fixed bytes and how long the run takes; every
later run starts from fresh copies and is signalled somewhere inside that time. Some files
have a second hard link, so both ways of writing (rename, and in place) are interrupted.

A signal that arrives while the interpreter is still importing the command (its first tenth
of a second or so, longer on a loaded machine) meets Python's own handlers, as in every
Python program: a ``KeyboardInterrupt`` traceback from ``importlib``, or death by SIGTERM,
before any file is read. Runs are signalled after that start-up, measured each time as twice
what ``offload-fixer check --help`` takes at that moment.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .bad_input import ENTRY, FIXABLE, OLD

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
EXPECTED_STATUS = {
    signal.SIGINT: (130, -signal.SIGINT),
    signal.SIGTERM: (143, -signal.SIGTERM),
    signal.SIGKILL: (-signal.SIGKILL,),
}
"""The statuses a shell reports as 128 + the signal: the command's own exit (130, 143), or
death by the signal itself, which a signal landing in the interpreter's teardown (after the
command has restored the handlers it replaced and every file is written) still gives."""


@dataclass
class Interrupted:
    signal: int
    delay_s: float
    status: int | None
    original: int = 0
    fixed: int = 0
    half_written: tuple[str, ...] = ()
    lost: tuple[str, ...] = ()
    left_behind: tuple[str, ...] = ()
    """Temporary files of the fixer still there (allowed only after SIGKILL)."""
    traceback: bool = False
    hung: bool = False

    @property
    def problems(self) -> list[str]:
        found = []
        if self.half_written:
            found.append(f"half-written: {', '.join(self.half_written)}")
        if self.lost:
            found.append(f"lost: {', '.join(self.lost)}")
        if self.left_behind and self.signal != signal.SIGKILL:
            found.append(f"temporary files left: {', '.join(self.left_behind)}")
        if self.traceback:
            found.append("traceback")
        if self.hung:
            found.append("hang")
        if self.status is not None and self.status not in (*EXPECTED_STATUS[self.signal], 0, 1):
            found.append(f"wrong exit code: {self.status} after {signal.Signals(self.signal).name}")
        return found


MULTI_PASS = (Path(__file__).resolve().parents[2] / "examples" / "optimizer_offload_broken.py").read_text()
"""A program whose fix takes two rounds of ``check --fix`` (the second streamed moment is
found once the first is moved): a signal between them must not leave the first round's text."""


def make_tree(directory: Path, files: int) -> dict[str, bytes]:
    """``files`` fixable programs, every other one fixed in two rounds (every fifth also
    hard-linked under ``links/``)."""
    tree = directory / "src"
    (directory / "links").mkdir(parents=True, exist_ok=True)
    originals = {}
    for i in range(files):
        # vary the size, so that writes of several pages are interrupted too
        if i % 2:
            text = MULTI_PASS.replace("train_step", f"train_step_{i}")
        else:
            text = FIXABLE.replace("def step(", f"def step_{i}(")
        text += "# padding\n" * (i % 3) * 250
        path = tree / f"pkg{i % 5}" / f"module_{i:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if i % 5 == 0:
            os.link(path, directory / "links" / f"module_{i:03d}.py")
        originals[str(path.relative_to(directory))] = text.encode()
    return originals


def start_up_s() -> float:
    """Seconds the command takes to start and leave without work (``check --help``), now."""
    start = time.perf_counter()
    subprocess.run([ENTRY, "check", "--help"], capture_output=True, env=_env(), timeout=120, check=True)
    return time.perf_counter() - start


def command() -> list[str]:
    return [ENTRY, "check", "--fix", "--unsafe-fixes", "--jax-version", OLD, "-j", "1", "-q", "src"]


def _env() -> dict[str, str]:
    return {**os.environ, "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1", "NO_COLOR": "1"}


def reference(directory: Path, files: int) -> tuple[dict[str, bytes], dict[str, bytes], float]:
    """(original bytes, fixed bytes, seconds the uninterrupted run takes)."""
    originals = make_tree(directory, files)
    start = time.perf_counter()
    done = subprocess.run(command(), cwd=directory, capture_output=True, text=True, env=_env(), timeout=600)
    took = time.perf_counter() - start
    if done.returncode not in (0, 1) or "Traceback" in done.stderr:
        raise RuntimeError(f"the reference fix failed ({done.returncode}):\n{done.stderr[-3000:]}")
    fixed = {name: (directory / name).read_bytes() for name in originals}
    if any(fixed[name] == originals[name] for name in originals):
        raise RuntimeError("the reference run left a file unfixed: nothing to interrupt")
    return originals, fixed, took


def interrupt_once(
    directory: Path, originals: dict[str, bytes], fixed: dict[str, bytes], duration_s: float, rng: random.Random
) -> Interrupted:
    shutil.rmtree(directory / "src", ignore_errors=True)
    shutil.rmtree(directory / "links", ignore_errors=True)
    make_tree(directory, len(originals))
    chosen = rng.choice(SIGNALS)
    # signal somewhere in the work that follows the interpreter's start-up
    start_up = 2 * start_up_s()
    delay = rng.uniform(start_up, max(duration_s, start_up + 0.2))
    process = subprocess.Popen(command(), cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    time.sleep(delay)
    process.send_signal(chosen)
    outcome = Interrupted(chosen, delay, None)
    try:
        _, err = process.communicate(timeout=120)
        outcome.status = process.returncode
        outcome.traceback = b"Traceback (most recent call last)" in err
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        outcome.hung = True
    half, lost = [], []
    for name, data in originals.items():
        path = directory / name
        if not path.exists():
            lost.append(name)
            continue
        now = path.read_bytes()
        if now == data:
            outcome.original += 1
        elif now == fixed[name]:
            outcome.fixed += 1
        else:
            half.append(name)
        link = directory / "links" / path.name
        if link.exists() and link.read_bytes() != now:
            half.append(f"{name} (its hard link differs)")
    outcome.half_written = tuple(half)
    outcome.lost = tuple(lost)
    outcome.left_behind = tuple(str(p.relative_to(directory)) for p in (directory / "src").rglob("*.offload-fixer"))
    return outcome
