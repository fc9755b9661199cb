"""A remat offload policy whose destination is device memory (``offload_dst="device"``,
``offload_dot_with_no_batch_dims("device", "device")``) offloads nothing: the residuals are in
device memory already (OFL1211). ``check`` reports it at the literal, as ``run`` does from the
traced program, and both fix it by spelling the destination ``"pinned_host"``; the fixed
program then offloads (``run`` finds nothing)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from offload_fixer import codes, jax_compat
from offload_fixer.static import check_source
from tests.cli_support import REPO, offload_fixer

FOLDER = REPO / "tests" / "runner_programs" / "silent_offloads"
PROGRAMS = {
    "destination_device_names": 'offload_dst="device"',
    "destination_device_dots": 'offload_dot_with_no_batch_dims("device", "device")',
}


def _does_nothing(command: str, path: Path) -> list[dict]:
    proc = offload_fixer(command, "--no-cache", "--format", "json", str(path))
    assert proc.returncode in (0, 1), proc.stderr
    return [d for d in json.loads(proc.stdout)["diagnostics"] if d["code"] == codes.OFFLOAD_DOES_NOTHING]


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_check_reports_the_device_destination_at_its_literal(program: str) -> None:
    path = FOLDER / f"{program}.py"
    (finding,) = _does_nothing("check", path)
    line = path.read_text().splitlines()[finding["span"]["line"] - 1]
    start = finding["span"]["col"] - 1
    assert line[start : start + len('"device"')] == '"device"'
    assert PROGRAMS[program] in line
    assert "offloads to `device`, which is not host memory" in finding["message"]
    assert finding["source"] == "static"


@pytest.mark.jax_dependent  # `run` traces the program under the installed JAX
@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_the_fix_spells_pinned_host_and_the_program_then_offloads(program: str, command: str, tmp_path: Path) -> None:
    if command == "run" and program == "destination_device_names":
        pytest.skip("run reports this policy at the tag inside a jit of grad of checkpoint, which it cannot verify")
    fixed = tmp_path / f"{program}.py"
    shutil.copy(FOLDER / f"{program}.py", fixed)
    proc = offload_fixer(command, "--no-cache", "--fix", str(fixed))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    before = (FOLDER / f"{program}.py").read_text().splitlines(keepends=True)
    after = fixed.read_text().splitlines(keepends=True)
    changed = [(old, new) for old, new in zip(before, after, strict=True) if old != new]
    assert len(changed) == 1
    old, new = changed[0]
    assert new == old[::-1].replace('"ecived"', '"tsoh_dennip"', 1)[::-1]  # the destination, the last "device"
    if jax_compat.regime() is jax_compat.Regime.TYPED:
        assert _does_nothing("run", fixed) == []


@pytest.mark.parametrize(
    "policy",
    [
        'save_and_offload_only_these_names(names_which_can_be_saved=[], names_which_can_be_offloaded=["a"], '
        'offload_src="device", offload_dst="pinned_host")',
        'offload_dot_with_no_batch_dims("device", "pinned_host")',
    ],
)
def test_only_a_policy_offloading_to_device_is_reported(policy: str) -> None:
    def reported(destination: str) -> list[int]:
        source = f"import jax\npolicy = jax.checkpoint_policies.{policy.replace('pinned_host', destination)}\n"
        result = check_source(source, "p.py")
        return [d.span.line for d in result.diagnostics if d.code == codes.OFFLOAD_DOES_NOTHING and d.span]

    assert reported("pinned_host") == []
    assert reported("device") == [2]
