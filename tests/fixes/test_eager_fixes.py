"""Eager operations on host arrays fixed at the user's line, as a user does it: ``offload-fixer
run`` marks them ``[*]``, ``run --fix`` writes exactly those edits, the fixed program prints what
the original printed, and ``run`` finds nothing in it. Each program in ``eager_programs/`` is a
script (no jit of the user's is edited: JAX compiles each eager operation alone)."""

from __future__ import annotations

import difflib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from offload_fixer import jax_compat
from offload_fixer.jax_compat.compiler_bugs import compiler_release, known_bug
from tests.cli_support import environment, offload_fixer

PROGRAMS = Path(__file__).parent / "eager_programs"

pytestmark = pytest.mark.skipif(
    jax_compat.regime() is not jax_compat.Regime.TYPED or not jax_compat.host_memory_on_this_backend(),
    reason="eager operations keep host memory from JAX 0.7.1 (jax.memory.Space spells the fix)",
)

CASES = {
    # program: (strategy, the code run reports, the lines as --fix writes them)
    "scan_trajectory_strided": (
        "auto",
        "OFL1213",
        [  # 99 columns: wrapped to 88 (no ruff or black settings above it) as ruff format wraps it
            "        [",
            "            round(float(x), 3)",
            "            for x in jax.device_put(trajectory, jax.memory.Space.Device)[::40, 0]",
            "        ],",
        ],
    ),
    "history_every_tenth": (
        "auto",
        "OFL1213",
        [
            "every_10th = jax.device_put(history, jax.memory.Space.Device)[",
            "    ::10, 1",
            "]  # one column, every tenth step",
        ],
    ),
    "mean_of_host_leaves": (
        "auto",
        "OFL1200",
        [
            "    print(",
            '        "mean of w:", float(jax.device_put(params["w"], jax.memory.Space.Device).mean())',
            "    )",
            "    print(",
            '        "mean of b:",',
            '        float(jnp.mean(jax.device_put(params["b"], jax.memory.Space.Device))),',
            "    )",
        ],
    ),
    "host_cache_element": (
        "workaround",
        "OFL1208",
        ['print("element:", float(jax.device_put(cache, jax.memory.Space.Device)[16, 0]))'],
    ),
}


TWO_DIMENSION_SLICE_FAILS = known_bug("tpu-async-slice-dimensions", "tpu", compiler_release("tpu")) is not None
"""The installed libtpu cannot copy a slice of two dimensions out of host memory (OFL1208: 0.0.42.1
cannot, 0.0.46.3 on can, and there ``run`` finds nothing in ``host_cache_element``)."""


def program_output(path: Path) -> str:
    proc = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, env=environment(), timeout=300, check=True
    )
    return proc.stdout


@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_fix_is_marked_written_and_runs(name: str, tmp_path: Path) -> None:
    strategy, code, fixed_lines = CASES[name]
    if code == "OFL1208" and not TWO_DIMENSION_SLICE_FAILS:
        pytest.skip(f"libtpu {compiler_release('tpu')} copies a slice of two dimensions from host memory")
    program = tmp_path / f"{name}.py"
    shutil.copy(PROGRAMS / program.name, program)
    before = program.read_text()
    printed = program_output(program)

    shown = offload_fixer("run", "--strategy", strategy, program.name, cwd=tmp_path)
    marked = re.search(r"\[\*\] (\d+) fixable with `--fix`", shown.stdout + shown.stderr)
    assert shown.returncode == 1 and marked, shown.stdout + shown.stderr
    assert f": {code} [*] [error]" in shown.stdout
    assert "fix (not automatic)" not in shown.stdout

    fixed = offload_fixer("run", "--fix", "--strategy", strategy, program.name, cwd=tmp_path)
    said = fixed.stdout + fixed.stderr
    assert f"({marked.group(1)} fixed, 0 remaining)" in said, said
    assert "not verified: an eager operation is compiled only when the program runs it" in said
    after = program.read_text()
    changed = [
        line[1:]
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line.startswith("+") and not line.startswith("+++")
    ]
    assert changed == fixed_lines

    assert program_output(program) == printed
    again = offload_fixer("run", "--strategy", strategy, program.name, cwd=tmp_path)
    assert again.returncode == 0 and "All checks passed!" in again.stdout, again.stdout + again.stderr


@pytest.mark.skipif(not TWO_DIMENSION_SLICE_FAILS, reason="the installed libtpu copies a slice of two dimensions")
def test_a_known_compiler_bug_gets_no_eager_edit_without_the_workaround(tmp_path: Path) -> None:
    """OFL1208 of libtpu 0.0.42.1 is fixed in a later release: ``auto`` writes nothing."""
    program = tmp_path / "host_cache_element.py"
    shutil.copy(PROGRAMS / program.name, program)
    before = program.read_bytes()
    proc = offload_fixer("run", "--fix", program.name, cwd=tmp_path)
    assert "OFL1208" in proc.stdout and "fixed in 0.0.46.3" in proc.stdout, proc.stdout + proc.stderr
    assert program.read_bytes() == before


TEST_OF_THE_ERROR = """\
import jax
import jax.numpy as jnp
import pytest


def test_mean_of_a_host_array_is_refused_on_tpu():
    history = jax.device_put(jnp.arange(400.0).reshape(100, 4), jax.memory.Space.Host)
    with pytest.raises(Exception):
        float(history.mean())
"""


def test_a_finding_in_a_test_that_expects_the_error_is_offered_a_suppression(tmp_path: Path) -> None:
    """Run under pytest as a user runs a test suite: the edit would make the test fail."""
    test_file = tmp_path / "test_refused.py"
    test_file.write_text(TEST_OF_THE_ERROR)
    args = ("run", "--fix", "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file.name)
    proc = offload_fixer(*args, cwd=tmp_path)
    assert test_file.read_text() == TEST_OF_THE_ERROR
    suggested = "`# offload-fixer: ignore[OFL1200, OFL1201]`"
    assert (
        "fix (not automatic): Move the host array to device before the eager operation on it (inside "
        f"`with pytest.raises(...)` (line 8), a test that expects this error: suppress it on its line ({suggested}, "
        "or `check --add-noqa`) instead of fixing it)"
    ) in proc.stdout, proc.stdout + proc.stderr

    line = "float(history.mean())"
    test_file.write_text(TEST_OF_THE_ERROR.replace(line, f"{line}  {suggested.strip('`')}"))
    again = offload_fixer(*args, cwd=tmp_path)
    assert "OFL1200" not in again.stdout and "OFL1201" not in again.stdout, again.stdout
