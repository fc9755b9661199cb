"""A line a fix makes longer than the project's limit is wrapped as ``ruff format`` wraps it:
the lines of each shape a fix writes, checked against the formatter itself, and two programs
fixed in an 80-column project as a user fixes them (``check --fix``, ``run --fix``), whose
fixed files ``ruff format --check`` accepts as it accepted them before."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from offload_fixer.code_style import CodeStyle
from offload_fixer.fixes.layout import wrap_long_lines

ROOT = Path(__file__).resolve().parents[2]
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
needs_ruff = pytest.mark.skipif(RUFF is None, reason="ruff is not installed (the lint extra)")

BEFORE = """\
import jax


def step(opt_state, trajectory, params, loss):
    mu, nu = opt_state["mu"], opt_state["nu"]
    history = trajectory[::40, 0]
    return params, new_opt_state, loss


@functools.partial(
    jax.jit,
    out_shardings=(PARAMS, RESTORED, None),
)
def g(x):
    print("displacement:", [round(float(x), 3) for x in trajectory[::40, 0]])
    step = jax.jit(train_step, donate_argnums=(0,))
    speed = jnp.mean(velocity_of_each_mass_over_the_whole_run)
    return 0.5 * jnp.sum(x**2) + 0.5 * STIFFNESS * jnp.sum(jnp.diff(x))
"""

AFTER = """\
import jax


def step(opt_state, trajectory, params, loss):
    mu, nu = jax.device_put(opt_state["mu"], jax.memory.Space.Device), jax.device_put(opt_state["nu"], jax.memory.Space.Device)  # moved
    history = jax.device_put(trajectory, jax.memory.Space.Device)[::40, 0]  # every 40th step
    return params, jax.device_put(new_opt_state, jax.memory.Space.Device), jax.device_put(loss, DEVICE)


@functools.partial(
    jax.jit,
    out_shardings=(PARAMS, {"count": ON_DEVICE, "mu": {**PARAMS, "b": ON_DEVICE.with_memory_kind("pinned_host")}}, None),
)
def g(x):
    print("displacement:", [round(float(x), 3) for x in jax.device_put(trajectory, jax.memory.Space.Device)[::40, 0]])
    step = jax.jit(train_step, donate_argnums=(0,), out_shardings=(PARAMS, ON_HOST_WITH_A_LONG_NAME))
    speed = jnp.mean(jax.device_put(velocity_of_each_mass_over_the_whole_run, jax.memory.Space.Device))
    return 0.5 * jnp.sum(x**2) + 0.5 * STIFFNESS * jnp.sum(jnp.diff(jax.device_put(x, jax.memory.Space.Device)))
"""


def ruff_format(text: str, tmp_path: Path, line_length: int) -> str:
    path = tmp_path / "formatted.py"
    path.write_text(text)
    subprocess.run([RUFF, "format", "--quiet", "--line-length", str(line_length), str(path)], check=True)
    return path.read_text()


@needs_ruff
@pytest.mark.parametrize("line_length", [78, 80, 88, 100, 110])
def test_the_lines_a_fix_made_are_wrapped_as_ruff_wraps_them(tmp_path: Path, line_length: int) -> None:
    assert ruff_format(BEFORE, tmp_path, line_length) == BEFORE
    wrapped = wrap_long_lines(BEFORE, cst.parse_module(AFTER), CodeStyle(line_length)).code
    assert wrapped == ruff_format(AFTER, tmp_path, line_length)


def test_lines_that_fit_or_that_the_fix_did_not_make_are_left_alone() -> None:
    long_before = BEFORE.replace(
        "    return params,", "    return params, this_line_is_the_users_own_and_stays_as_long_as_it_is,"
    )
    fixed = cst.parse_module(long_before.replace("history = trajectory", "history = jax.device_put(trajectory)"))
    assert wrap_long_lines(long_before, fixed, CodeStyle(88)) is fixed
    assert wrap_long_lines(BEFORE, cst.parse_module(AFTER), CodeStyle(200)).code == AFTER


def test_the_wrapped_lines_are_the_one_edit() -> None:
    """Wrapping adds lines inside brackets only: the statements are the same, and a second
    wrap changes nothing."""
    import ast

    once = wrap_long_lines(BEFORE, cst.parse_module(AFTER), CodeStyle(80))
    assert ast.dump(ast.parse(once.code)) == ast.dump(ast.parse(AFTER))
    assert wrap_long_lines(BEFORE, once, CodeStyle(80)).code == once.code
    assert max(len(line) for line in once.code.splitlines() if "# every" not in line) <= 80


PROJECT = '[project]\nname = "sim"\n\n[tool.ruff]\nline-length = 80\n'


def fix_in_project(tmp_path: Path, program: Path, command: list[str]) -> tuple[str, str]:
    """(the program as ruff formats it in an 80-column project, the same after ``command``)."""
    (tmp_path / "pyproject.toml").write_text(PROJECT)
    path = tmp_path / program.name
    shutil.copy(program, path)
    subprocess.run([RUFF, "format", "--quiet", str(path)], check=True, cwd=tmp_path)
    subprocess.run([RUFF, "format", "--check", "--quiet", str(path)], check=True, cwd=tmp_path)
    before = path.read_text()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-m", "offload_fixer", *command, path.name],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert "1 fixed" in done.stdout + done.stderr, done.stdout[-2000:] + done.stderr[-2000:]
    checked = subprocess.run([RUFF, "format", "--check", str(path)], capture_output=True, text=True, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return before, path.read_text()


@needs_ruff
def test_check_fix_in_an_80_column_project(tmp_path: Path) -> None:
    program = ROOT / "tests" / "fixes" / "programs" / "adam_moments_read_together.py"
    before, after = fix_in_project(tmp_path, program, ["check", "--fix", "--no-cache"])
    read = '    mu, nu = opt_state["mu"], opt_state["nu"]\n'
    assert read in before
    assert after == before.replace(
        read,
        "    mu, nu = (\n"
        '        jax.device_put(opt_state["mu"], jax.memory.Space.Device),\n'
        '        jax.device_put(opt_state["nu"], jax.memory.Space.Device),\n'
        "    )\n",
    )


@needs_ruff
def test_run_fix_in_an_80_column_project(tmp_path: Path) -> None:
    program = ROOT / "tests" / "fixes" / "eager_programs" / "scan_trajectory_strided.py"
    before, after = fix_in_project(tmp_path, program, ["run", "--fix"])
    read = "        [round(float(x), 3) for x in trajectory[::40, 0]],\n"
    assert read in before
    assert after == before.replace(
        read,
        "        [\n"
        "            round(float(x), 3)\n"
        "            for x in jax.device_put(trajectory, jax.memory.Space.Device)[\n"
        "                ::40, 0\n"
        "            ]\n"
        "        ],\n",
    )
