"""The pre-commit hook of ``.pre-commit-hooks.yaml``, run by pre-commit itself from a scratch repo.

pre-commit installs this repository into a virtual environment of its own, as it does for a
user whose ``.pre-commit-config.yaml`` names it, and runs the ``offload-fixer`` hook on the
files given. Both broken programs of the README's Quick start must stop the commit; the
fixed program must pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
BROKEN = ("optimizer_offload_broken.py", "param_streaming_broken.py")

pytest.importorskip("pre_commit")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("git") is None, reason="pre-commit needs git")]


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_the_hook_stops_a_commit_of_either_quick_start_example(tmp_path):
    scratch = tmp_path / "project"
    scratch.mkdir()
    git("init", "-q", cwd=scratch)
    for name in (*BROKEN, "optimizer_offload.py"):
        shutil.copyfile(EXAMPLES / name, scratch / name)
    git("add", ".", cwd=scratch)
    environment = {
        **os.environ,
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        # the hook's environment gets the JAX the tests pin, from pip's cache
        "PIP_CONSTRAINT": str(REPO / "constraints.txt"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(REPO), "offload-fixer", "--files", *BROKEN,
         "optimizer_offload.py"],
        cwd=scratch, env=environment, capture_output=True, text=True, timeout=1200,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Failed" in output
    for name in BROKEN:
        assert f"{name}:" in output and "OFL1200" in output, output
    assert "optimizer_offload.py:" not in output, output
