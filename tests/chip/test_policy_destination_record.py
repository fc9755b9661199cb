"""What a TPU v5e chip did with the remat policies whose destination is device memory and with
their fixes (``policy_destination_record.json``, made by ``scripts/chip_policy_destinations.py``):
as written the compiled gradient holds no host memory (the policy offloads nothing: OFL1211);
with the destination the fix spells, it holds host memory and computes the same numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts.chip_policy_destinations import CASES, FOLDER, respelled

RECORD = json.loads((Path(__file__).parent / "policy_destination_record.json").read_text())


def test_the_record_is_the_chips() -> None:
    assert "TPU v5" in RECORD["device_kind"]
    assert (RECORD["jax"], RECORD["libtpu"], RECORD["date"]) == ("0.10.2", "0.0.42.1", "2026-12-07")
    assert sorted(RECORD["programs"]) == sorted([*CASES, *(f"{name}_fixed" for name in CASES)])


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_policy_offloads_only_once_fixed_and_the_numbers_stay(name: str) -> None:
    original, fixed = RECORD["programs"][name], RECORD["programs"][f"{name}_fixed"]
    assert original["host_temp"] + original["host_output"] == 0
    assert fixed["host_temp"] + fixed["host_output"] > 0
    assert fixed["result"] == original["result"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_measured_edit_is_one_destination_literal(name: str) -> None:
    """The chip ran the program as ``--fix`` writes it (tests/static/test_device_destinations.py
    holds the tool to this same one-literal edit)."""
    source = (FOLDER / f"{name}.py").read_text()
    changed = [(a, b) for a, b in zip(source.splitlines(), respelled(source).splitlines(), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1] == changed[0][0].replace('"device")', '"pinned_host")').replace(
        'offload_dst="device"', 'offload_dst="pinned_host"'
    )
