"""``run`` on a TPU v5e chip and ``run`` on this CPU with the chip emulated: the same transcript.

``tests/accelerator/tpu_v5e_transcripts.json`` holds what ``offload-fixer run`` printed on a
TPU v5e (JAX 0.10.2, libtpu 0.0.42.1) over the examples, the programs with several failing
compilations (``tests/accelerator_programs/``), ``--no-keep-going``, ``-v``, ``--confirm`` and
``--fix`` (recorded by ``scripts/accelerator_transcripts.py``). Each run is made again here as
a user makes it, with ``OFFLOAD_FIXER_EMULATE_ACCELERATOR=tpu``: libtpu compiles each
compilation (compile-only) before it runs and its rejection is raised as the chip raises it.
The tool's notes, the findings it reports, JAX's tracebacks under ``-v`` and the files
``--fix`` writes must be the chip's, line for line; only timings and the device's name differ.
A change to what ``run`` prints here needs the record made again on a chip.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from offload_fixer import jax_compat
from offload_fixer.xla import compilers
from tests.cli_support import REPO, offload_fixer

RECORD = json.loads((REPO / "tests" / "accelerator" / "tpu_v5e_transcripts.json").read_text(encoding="utf-8"))
RUNS = [run for run in RECORD["runs"] if not run.get("aborted")]
CHIP_ONLY = "--confirm"
"""On the chip its own compile is ``--confirm``'s judge; emulated, the deviceless compiler
confirms (``tests/test_accelerator.py``)."""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        jax_compat.installed_version() != RECORD["jax"]
        or str(compilers.installed("tpu")) != f"libtpu {RECORD['libtpu']}",
        reason=f"recorded under JAX {RECORD['jax']} and libtpu {RECORD['libtpu']}: another version may say otherwise",
    ),
]

TIMES = re.compile(r"\d+\.\d+ ms")
CACHE = re.compile(r"offload-fixer: \d+ of \d+ verdicts read from ")
"""``-v``'s count of the verdicts this machine's cache held (``offload_fixer.verdicts``): the
state of one checkout, as timings are of one machine (the chip's record predates it)."""
DEVICES = re.compile(r"TPU v5 lite|tpu \(emulated: [^)]*\)")
FRAME = re.compile(r'File "[^"]*?((?:examples|tests|jax)/[^"]+)"')


def transcript(report: str | None, stderr: str) -> list[str]:
    """What is compared: the tool's notes, JAX's tracebacks (``-v``), every line of the report;
    timings, the device's name, where the checkout is and what its verdict cache held are left
    out."""
    kept = []
    in_traceback = False
    for line in stderr.splitlines():
        if line.startswith("Traceback (most recent call last)"):
            in_traceback = True
        elif line.startswith("offload-fixer:"):
            in_traceback = False
        if (in_traceback or line.startswith("offload-fixer:")) and not CACHE.match(line):
            kept.append(line)
    kept += (report or "").splitlines()
    return [FRAME.sub(r'File "\1"', DEVICES.sub("<device>", TIMES.sub("<time>", line))) for line in kept]


def test_the_record_is_the_chips():
    assert RECORD["backend"] == "tpu" and RECORD["emulated"] is None
    assert RECORD["device_kind"] == "TPU v5 lite"
    assert len(RUNS) == len(RECORD["runs"]), "a run died on the chip: record it again"


@pytest.mark.parametrize("run", [r for r in RUNS if CHIP_ONLY not in r["argv"]], ids=lambda r: " ".join(r["argv"][2:]))
def test_emulated_run_prints_what_the_chip_printed(run, tmp_path):
    cwd = REPO
    if run["copy"]:
        cwd = tmp_path
        for path in run["copy"]:
            shutil.copy(REPO / path, tmp_path / Path(path).name)
    report = tmp_path / "report.txt"
    argv = [str(report) if a == "REPORT" else a for a in run["argv"]]
    proc = offload_fixer("run", *argv, cwd=cwd, OFFLOAD_FIXER_EMULATE_ACCELERATOR="tpu")
    text = report.read_text(encoding="utf-8") if report.exists() else None
    assert transcript(text, proc.stderr) == transcript(run["report"], run["stderr"])
    assert proc.returncode == run["exit_code"], proc.stderr
    for name, fixed in run.get("fixed", {}).items():
        assert (cwd / name).read_text(encoding="utf-8") == fixed
    if run["argv"][-1].startswith("tests/accelerator_programs/"):
        # they print only numbers exact in float32: patched or not, the CPU computes what the chip did
        assert proc.stdout == run["stdout"]
