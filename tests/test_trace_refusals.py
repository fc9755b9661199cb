"""``offload_fixer.trace_refusals``: JAX's refusal to trace an operation on host and device
operands (JAX >= 0.7.1), reported by the Python API and by ``run`` with the move that fixes it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import offload_fixer
from offload_fixer import codes, jax_compat
from offload_fixer.exit_codes import ExitCode
from tests.cli_support import REPO, environment
from tests.cli_support import offload_fixer as run_command

PROGRAM = REPO / "tests" / "runner_programs" / "committed_host_params.py"
EXPECTED = re.compile(r"#\s*expect-refused:\s*(?P<primitive>\w+)\s+(?P<argument>\S+)")

pytestmark = pytest.mark.skipif(
    jax_compat.spelling().regime is not jax_compat.Regime.TYPED or not jax_compat.host_memory_on_this_backend(),
    reason=f"JAX {jax.__version__} traces operations on host and device operands (it refuses them from 0.7.1)",
)


def expected_refusals() -> list[tuple[int, str, str]]:
    """(line, primitive, argument) of each ``# expect-refused:`` mark of the program."""
    lines = PROGRAM.read_text().splitlines()
    return [(n, m["primitive"], m["argument"]) for n, line in enumerate(lines, 1) if (m := EXPECTED.search(line))]


def host_params():
    mesh = jax.sharding.Mesh(jax.devices()[:1], ("data",))
    host = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(), memory_kind="pinned_host")
    return jax.device_put({"w": jnp.ones((8, 4)), "b": jnp.zeros((4,))}, host)


def test_the_api_names_each_committed_host_argument_jax_refuses_and_where():
    namespace: dict = {"__name__": "committed_host_params"}
    exec(compile(PROGRAM.read_text(), str(PROGRAM), "exec"), namespace)
    report = offload_fixer.check(namespace["loss"], host_params(), jnp.ones((16, 8)))
    found = [(d.span.line, d.trace[-1].op, d.origin.argument) for d in report.diagnostics]
    assert found == expected_refusals()
    for d in report.diagnostics:
        assert (d.code, d.severity, d.origin.kind) == (codes.MIXED_MEMORY_SPACES, "error", "host_argument")
        assert f"`{d.trace[-1].op}` must be the same" in d.message  # JAX's own words
        assert [fix.strategy for fix in d.fixes] == ["device"]
    by_keyword = offload_fixer.check(namespace["loss"], x=jnp.ones((16, 8)), params=host_params())
    assert [d.origin.argument for d in by_keyword.diagnostics] == [argument for _, _, argument in expected_refusals()]


MOVED_INSIDE = """\
import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    table = jax.device_put(jnp.ones((8, 4)), jax.memory.Space.Host)
    return x @ table + jnp.ones((16, 8)) @ table
"""


def test_a_value_moved_to_host_inside_the_function_is_found_in_its_source(tmp_path: Path):
    """JAX's error gives no place for a move the function makes itself: the source check of
    the function's file does, with its fix."""
    path = tmp_path / "moved.py"
    path.write_text(MOVED_INSIDE)
    namespace: dict = {}
    exec(compile(MOVED_INSIDE, str(path), "exec"), namespace)
    (d,) = offload_fixer.check(namespace["step"], jnp.ones((16, 8))).diagnostics
    assert (d.code, d.origin.kind, d.origin.span.line, d.span.line) == (codes.MIXED_MEMORY_SPACES, "move_to_host", 7, 8)
    assert [fix.strategy for fix in d.fixes] == ["device"]


def test_without_its_source_the_refusal_is_reported_without_a_guessed_fix():
    namespace: dict = {}
    exec(compile(MOVED_INSIDE, "<notebook cell>", "exec"), namespace)
    (d,) = offload_fixer.check(namespace["step"], jnp.ones((16, 8))).diagnostics
    assert (d.code, d.origin.kind, d.origin.span, d.fixes) == (codes.MIXED_MEMORY_SPACES, "move_to_host", None, ())
    assert "offload-fixer check" in d.origin.detail


def test_another_trace_error_is_the_callers():
    def step(w, x):
        return w @ x  # (8, 4) @ (16, 8): the shapes do not fit

    with pytest.raises(TypeError):
        offload_fixer.check(jax.jit(step), host_params()["w"], jnp.ones((16, 8)))


@pytest.mark.slow
def test_run_reports_the_refusals_and_fixes_the_program(tmp_path: Path):
    program = tmp_path / PROGRAM.name
    shutil.copy(PROGRAM, program)
    proc = run_command("run", "--format", "json", str(program), cwd=tmp_path, JAX_PLATFORMS="cpu")
    assert proc.returncode == ExitCode.PROGRAM_FAILED, proc.stderr  # the program itself failed: JAX refused it
    assert "ValueError: memory_space of all inputs passed to `dot_general` must be the same" in proc.stderr
    printed = [(d["span"]["line"], d["code"]) for d in json.loads(proc.stdout)["diagnostics"]]
    assert printed == [(line, codes.MIXED_MEMORY_SPACES) for line, _, _ in expected_refusals()]
    fixing = run_command("run", "--fix", str(program), cwd=tmp_path, JAX_PLATFORMS="cpu")
    assert "Found 1 problem (1 fixed, 0 remaining)." in fixing.stdout, fixing.stdout + fixing.stderr
    fixed = subprocess.run(
        [sys.executable, str(program)],
        cwd=tmp_path,
        env=environment(JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
    )
    assert fixed.returncode == 0 and fixed.stdout == "loss 64.0\n", fixed.stderr
