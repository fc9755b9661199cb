"""What a TPU v5e chip did with the kernels that alias a host value into one of their several
outputs (``alias_abort_record.json``, made by ``scripts/chip_alias_abort.py``, each program in
a process of its own), held against what the tool says: libtpu 0.0.42.1 aborts on each aliasing
kernel with a CHECK that the tool words as OFL1216, the kernel given the value on device runs,
and convolutions over a host-resident kernel do not abort (the issue's ``nn.Conv`` report is
not reproduced there): given the host kernel as it is, JAX refuses at trace time (OFL1215)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offload_fixer import codes, jax_compat
from offload_fixer.rules import rule_codes
from scripts.chip_alias_abort import NAMES

RECORD = json.loads((Path(__file__).parent / "alias_abort_record.json").read_text())
PROGRAMS = RECORD["programs"]
ALIASING = [name for name in NAMES if name.startswith("alias")]


def test_the_record_is_the_chips_and_holds_every_program() -> None:
    assert "TPU v5" in RECORD["device_kind"] and RECORD["platform"] == "tpu"
    assert (RECORD["jax"], RECORD["libtpu"], RECORD["date"]) == ("0.10.2", "0.0.42.1", "2026-12-07")
    assert sorted(PROGRAMS) == sorted(NAMES), "stale record: run scripts/chip_alias_abort.py on a chip"


@pytest.mark.parametrize("name", ALIASING)
def test_each_aliasing_kernel_aborts_with_a_check_the_tool_words_as_ofl1216(name: str) -> None:
    outcome = PROGRAMS[name]
    assert outcome["returncode"] == -6, outcome  # SIGABRT
    check = next(line for line in outcome["stderr"] if "Check failed" in line)
    assert codes.HOST_ALIASED_INTO_ONE_RESULT in rule_codes(check), check


def test_the_value_moved_to_device_first_runs() -> None:
    assert PROGRAMS["moved_to_device_first"]["returncode"] == 0


def test_no_convolution_over_a_host_kernel_aborts() -> None:
    convolutions = {name: PROGRAMS[name] for name in NAMES if name.startswith("conv_")}
    assert all(outcome["returncode"] in (0, 1) for outcome in convolutions.values()), convolutions
    refused = "\n".join(convolutions["conv_host_kernel_forward"]["stderr"])
    assert jax_compat.mixed_memory_space_refusal(ValueError(refused)) == "conv_general_dilated", refused
