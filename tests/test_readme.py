"""The README cannot drift: its transcripts are compared with real output, its tables with
the code they describe, and its table of ruff's conventions with the command's options."""

from __future__ import annotations

import difflib
import os
import re
import shutil
import sys

import pytest

from offload_fixer import jax_compat
from offload_fixer.cli import main
from tests.cli_support import REPO
from tests.readme_transcripts import readme_script


def differences(current: str, fresh: str) -> str:
    return "".join(difflib.unified_diff(current.splitlines(True), fresh.splitlines(True), "README.md", "real output"))


def test_generated_tables_match_the_code():
    current = (REPO / "README.md").read_text(encoding="utf-8")
    script = readme_script()
    assert set(script.GENERATORS) == set(re.findall(r"<!-- generated: ([\w-]+) -->", current))
    fresh = script.regenerate_tables(current)
    assert fresh == current, "run scripts/readme.py --update\n" + differences(current, fresh)


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("offload-fixer", path=os.path.dirname(sys.executable)) is None,
    reason="the offload-fixer entry point is not installed in this environment",
)
def test_every_transcript_is_real_output():
    script = readme_script()
    import jax

    if jax.__version__ != script.pinned_jax() or not jax_compat.host_memory_on_this_backend():
        pytest.skip(f"the transcripts are made with jax {script.pinned_jax()} (this is {jax.__version__})")
    current = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(script.CONSOLE_BLOCK.findall(current)) >= 3
    fresh = script.regenerate_transcripts(current)
    assert fresh == current, "run scripts/readme.py --update\n" + differences(current, fresh)


def test_the_ruff_table_names_only_options_that_exist():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| ruff convention | offload-fixer |") :]
    table = table[: table.index("\n\n")]
    ours = "\n".join(row.split(" | ", 1)[1] for row in table.splitlines()[2:])
    options = {opt for command in main.commands.values() for param in command.params for opt in param.opts}
    options |= {opt for param in main.params for opt in param.opts}
    named = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", ours)) - {"-"}
    assert named and named <= options, named - options
    for key in re.findall(r"`([a-z-]+)`", ours):
        if key in ("exclude", "extend-exclude", "per-file-ignores"):
            assert f"{key} =" in readme or f".{key}]" in readme  # shown in the Configuration example
