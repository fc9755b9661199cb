"""What a TPU v5e chip did with the eager programs and their fixes (``eager_record.json``, made
by ``scripts/chip_eager.py`` in one process on the chip), held against what the tool says and
writes: each original fails there with the error ``run`` predicts, each fix as ``--fix`` writes
it now runs there and prints the CPU's numbers, and the scan example runs. CI has no
accelerator: a fix that changes makes the record stale (refresh it on a chip)."""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import pytest

from offload_fixer import codes, jax_compat, xla_messages
from offload_fixer.rules import backend_codes
from tests.fixes.test_eager_fixes import CASES, PROGRAMS, program_output

RECORD = json.loads((Path(__file__).parent / "eager_record.json").read_text())
NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")


def codes_of(error: str) -> set[str]:
    """The codes whose XLA text the chip's error holds (its first line: XLA's error 1200 is
    OFL1200 by its code, ``E1200``)."""
    offloader = {m.code for m in xla_messages.HOST_OFFLOADER_MESSAGES if m.code and m.pattern().search(error)}
    error_1200 = {codes.HOST_VALUE_DEVICE_OUTPUT} if "E1200: " in error else set()
    return set(backend_codes(error)) | offloader | error_1200


def test_the_record_is_the_chips() -> None:
    assert "TPU v5" in RECORD["device_kind"]
    assert (RECORD["jax"], RECORD["libtpu"], RECORD["date"]) == ("0.10.2", "0.0.42.1", "2026-12-07")


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_original_fails_on_the_chip_as_run_predicts(name: str) -> None:
    outcome = RECORD["programs"][f"original:{name}"]
    assert outcome["source"] == (PROGRAMS / f"{name}.py").read_text(), "stale record: run scripts/chip_eager.py"
    assert not outcome["ran"]
    assert CASES[name][1] in codes_of(outcome["error"]), outcome["error"]


@pytest.mark.skipif(
    jax_compat.regime() is not jax_compat.Regime.TYPED or not jax_compat.host_memory_on_this_backend(),
    reason="the programs run on the CPU with pinned_host memory, which JAX keeps eagerly from 0.7.1",
)
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_fix_as_written_runs_on_the_chip_with_the_cpus_numbers(name: str) -> None:
    original = (PROGRAMS / f"{name}.py").read_text()
    outcome = RECORD["programs"][f"fixed:{name}"]
    added = [
        line[1:]
        for line in difflib.unified_diff(original.splitlines(), outcome["source"].splitlines(), lineterm="", n=0)
        if line.startswith("+") and not line.startswith("+++")
    ]
    assert added == CASES[name][2], "stale record: the fix --fix writes has changed"
    assert outcome["ran"], outcome.get("error")
    on_cpu = program_output(PROGRAMS / f"{name}.py")
    assert NUMBER.sub("#", outcome["stdout"]) == NUMBER.sub("#", on_cpu)
    chip = [float(x) for x in NUMBER.findall(outcome["stdout"])]
    cpu = [float(x) for x in NUMBER.findall(on_cpu)]
    # the TPU multiplies f32 in bf16 passes: close, not equal
    assert chip == pytest.approx(cpu, rel=2e-2, abs=2e-3)


def test_the_scan_example_runs_on_the_chip() -> None:
    outcome = RECORD["programs"]["example:scan_stream_to_host"]
    assert outcome["source"] == (PROGRAMS.parents[2] / "examples" / "scan_stream_to_host.py").read_text()
    assert outcome["ran"] and "trajectory lives in: pinned_host" in outcome["stdout"], outcome.get("error")
