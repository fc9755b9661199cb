"""The verification stage decides what is written, and ``[*]`` says the same: a fix the compiler
rejects, or whose fixed program the analysis still finds failing, is not written nor marked,
and says why in the words of the check that refused it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from offload_fixer import jax_compat
from offload_fixer.exit_codes import ExitCode
from tests.cli_support import offload_fixer

HOST_INDICES = """\
import functools

import jax
import numpy as np

HOST = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")
DEVICE = HOST.with_memory_kind("device")


@functools.partial(jax.jit, in_shardings=(HOST, HOST, DEVICE), out_shardings=HOST, donate_argnums=0)
def write_rows(buffer, rows, values):
    return buffer.at[rows].set(values)


if __name__ == "__main__":
    buffer = jax.device_put(np.zeros((16, 4), np.float32), HOST)
    rows = jax.device_put(np.array([1, 4, 9], np.int32), HOST)
    print(write_rows(buffer, rows, jax.device_put(np.ones((3, 4), np.float32), DEVICE)).shape)
"""
"""A scatter into a donated host buffer at host indices. Moving the buffer alone to device (the
plan for its finding) leaves the indices' arithmetic host compute feeding the scatter: libtpu
still fails (OFL1207 from the indices), and the analysis of the fixed program says so too."""

pytestmark = pytest.mark.skipif(
    not jax_compat.spelling().memory_space_api, reason="the fix spells jax.memory.Space (JAX >= 0.7.1)"
)


def test_a_fix_the_compiler_rejects_is_neither_marked_nor_written(tmp_path: Path, tpu_compiler):
    program = tmp_path / "rows.py"
    program.write_text(HOST_INDICES)
    proc = offload_fixer("run", str(program), cwd=tmp_path)
    assert proc.returncode == ExitCode.FINDINGS, proc.stdout + proc.stderr
    assert "[*]" not in proc.stdout, proc.stdout
    assert "fix (not automatic): Move argument buffer to device" in proc.stdout, proc.stdout
    assert re.search(r"libtpu [\d.]+ still rejects the fixed `write_rows`: INTERNAL:", proc.stdout), proc.stdout
    proc = offload_fixer("run", "--fix", str(program), cwd=tmp_path)
    assert proc.returncode == ExitCode.FIX_REFUSED, proc.stdout + proc.stderr
    assert program.read_text() == HOST_INDICES
    assert "[*]" not in proc.stdout and "fixable" not in proc.stdout, proc.stdout


def test_without_a_compiler_the_analysis_of_the_fixed_program_refuses_it(tmp_path: Path):
    program = tmp_path / "rows.py"
    program.write_text(HOST_INDICES)
    no_compiler = {"OFFLOAD_FIXER_XLA_PYTHON": str(tmp_path / "no-python")}
    proc = offload_fixer("run", "--fix", str(program), cwd=tmp_path, **no_compiler)
    assert proc.returncode == ExitCode.FIX_REFUSED, proc.stdout + proc.stderr
    assert program.read_text() == HOST_INDICES
    said = proc.stdout + proc.stderr
    assert "the fixed `write_rows`, analysed again, still fails: OFL1207" in said, said
    assert "argument rows declared pinned_host" in said, said
