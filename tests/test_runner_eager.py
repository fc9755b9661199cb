"""``run`` checks the jits JAX compiles for eager operations on host arrays."""

from __future__ import annotations

from pathlib import Path

import pytest

from offload_fixer import jax_compat
from offload_fixer.runner import run_program

PROGRAM = Path(__file__).parent / "runner_programs" / "eager_host_ops.py"

pytestmark = pytest.mark.skipif(
    not jax_compat.host_memory_on_this_backend(), reason="the program needs pinned_host memory (JAX >= 0.5 on CPU)"
)


def expected_lines() -> dict[int, str]:
    typed = jax_compat.regime() is jax_compat.Regime.TYPED
    lines = PROGRAM.read_text().splitlines()
    return {
        i: line.split("# expect: eager ")[1]
        for i, line in enumerate(lines, 1)
        if "# expect: eager" in line and not (typed and "(before 0.7.1)" in line)
    }


def test_eager_operations_on_host_arrays_are_reported_at_the_users_line():
    result = run_program(str(PROGRAM), target="tpu")
    assert result.program_exit_code == 0, result.program_exception
    found = {}
    for report in result.reports:
        for d in report.diagnostics:
            found.setdefault(d.location.line, set()).add(d.code)
            assert d.location.path == str(PROGRAM)
            assert report.function.name.endswith("(eager)") and report.function.path == str(PROGRAM)
    expected = expected_lines()
    assert set(expected) <= set(found)
    # JAX >= 0.7.1 types the results host memory: host compute. Before, they are declared
    # device memory: error 1200.
    code = "OFL1201" if jax_compat.regime() is jax_compat.Regime.TYPED else "OFL1200"
    assert all(code in found[line] for line in expected)
    assert result.checked >= len(expected)


def test_the_hook_is_gone_after_the_run():
    from jax._src import pjit

    before = {name: getattr(pjit, name, None) for name in ("_run_python_pjit", "_python_pjit_helper")}
    run_program(str(PROGRAM), target="tpu")
    assert {name: getattr(pjit, name, None) for name in before} == before
