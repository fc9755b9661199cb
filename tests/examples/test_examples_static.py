"""``offload-fixer check`` (the installed command, nothing executed) on the Quick start programs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from examples_support import EXAMPLES_DIR

COMMAND = str(Path(sys.executable).parent / "offload-fixer")


@pytest.mark.parametrize(
    "name, needle, outputs",
    [
        ("optimizer_offload_broken", "in_shardings=(PARAM_SHARDINGS", ["[0]['b']", "[0]['w']"]),
        ("param_streaming_broken", "in_shardings=(ON_HOST, ON_DEVICE)", ["[1]"]),
    ],
)
def test_check_finds_both_broken_quick_start_examples(name, needle, outputs):
    path = EXAMPLES_DIR / f"{name}.py"
    done = subprocess.run(
        [COMMAND, "check", "--jax-version", "0.10.2", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    found = [d for d in json.loads(done.stdout)["diagnostics"] if d["code"] == "OFL1200"]
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if needle in text)
    assert sorted(d["output_path"] for d in found) == outputs
    assert {d["span"]["line"] for d in found} == {line}


@pytest.mark.parametrize("name", ["optimizer_offload", "param_streaming"])
def test_check_passes_their_fixed_versions(name):
    done = subprocess.run(
        [COMMAND, "check", "--jax-version", "0.10.2", str(EXAMPLES_DIR / f"{name}.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout
