"""``check --watch``: the check again after each change, until Ctrl-C, in a terminal."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.programs import BROKEN
from tests.cli_support import command, environment


@pytest.mark.slow
def test_watch_checks_again_when_a_file_changes(tmp_path: Path):
    path = tmp_path / "train.py"
    path.write_text("x = 1\n")
    proc = subprocess.Popen(
        [*command(), "check", "--watch", "--format", "concise", "train.py"],
        cwd=tmp_path,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    output = ""
    try:
        output += _read_until(proc, "Watching for file changes.")
        assert "All checks passed! (1 file checked)" in output, output
        path.write_text(BROKEN)
        output += _read_until(proc, "Watching for file changes.")
        assert "File change detected..." in output and "train.py:9:29: OFL1200" in output, output
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 130  # Ctrl-C, as any interrupted command


def _read_until(proc: subprocess.Popen, marker: str, timeout: float = 120) -> str:
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while marker not in seen and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
    return seen
