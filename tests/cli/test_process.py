"""The installed command ends a static check without Python's teardown, every byte of its
output written and its exit status kept; every other command ends as Python ends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ENTRY = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('EXIT HANDLER', flush=True))\n"
    "class Finalized:\n"
    "    def __del__(self):\n"
    "        print('TEARDOWN', flush=True)\n"
    "held = Finalized()  # let go of only as Python clears the modules\n"
    "sys.argv = ['offload-fixer', *sys.argv[1:]]\n"
    "from offload_fixer.cli import entry\n"
    "entry()\n"
)
BROKEN = """\
import jax
from jax.sharding import SingleDeviceSharding

host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


@jax.jit
def f(x):
    y = jax.device_put(x, host)
    return jax.device_put(y * 2, jax.devices()[0])
"""


def entry(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OFFLOAD_FIXER_NO_CACHE": "1", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, cwd=cwd, env=env, check=False
    )


@pytest.mark.parametrize(
    ("source", "status"),
    [("import json\n", 0), (BROKEN, 1)],
)
def test_a_check_ends_its_process_without_teardown_and_with_its_report_and_status(tmp_path, source, status):
    program = tmp_path / "prog.py"
    program.write_text(source)
    done = entry("check", str(program))
    assert done.returncode == status, done.stderr
    assert "TEARDOWN" not in done.stdout
    assert done.stdout.rstrip().endswith("EXIT HANDLER")  # a pool's, logging's: they run
    report = done.stdout.rstrip().removesuffix("EXIT HANDLER").rstrip()
    assert report.endswith("(1 file checked)" if status == 0 else "fixable with `--fix`.")
    assert "Traceback" not in done.stderr


def test_a_usage_error_of_check_keeps_its_message_and_status():
    done = entry("check", "--select", "OFL9999", ".")
    assert done.returncode == 2
    assert "selects no rule" in done.stderr
    assert "TEARDOWN" not in done.stdout


@pytest.mark.parametrize("args", [["rules"], ["--version"], ["explain", "--help"]])
def test_other_commands_end_as_python_ends(args):
    """``run`` executes the user's program, whose finalizers must run: only ``check`` asks."""
    done = entry(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("EXIT HANDLER\nTEARDOWN")


def test_a_reader_that_goes_away_leaves_no_error_behind(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text(BROKEN)
    reader = subprocess.Popen(["head", "-c", "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    done = subprocess.run(
        [sys.executable, "-m", "offload_fixer", "check", "--no-cache", str(program)],
        stdout=reader.stdin,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    reader.stdin.close()  # type: ignore[union-attr]
    reader.wait()
    assert done.returncode == 1
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr
