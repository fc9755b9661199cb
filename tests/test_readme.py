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


def ruff_table() -> list[tuple[str, str]]:
    """(ruff 0.17, offload-fixer) of each row of the README's table of ruff's conventions."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| ruff 0.17 | offload-fixer |") :]
    table = table[: table.index("\n\n")]
    rows = [row.strip("|").split(" | ", 1) for row in table.splitlines()[2:]]
    return [(ruff.strip(), ours.strip()) for ruff, ours in rows]


def test_every_row_of_the_ruff_table_is_the_same_or_marked_own():
    for ruff, ours in ruff_table():
        assert ours.startswith("same") or "**own**" in ours, (ruff, ours)


RUFF = shutil.which("ruff", path=os.path.dirname(sys.executable))


@pytest.mark.skipif(RUFF is None, reason="ruff (the lint extra) is not installed")
def test_the_ruff_column_is_what_the_pinned_ruff_prints(tmp_path):
    """The ruff words the table quotes, from the ruff ``constraints.txt`` pins, on its streams."""
    import subprocess

    (tmp_path / "a.py").write_text("import os\n")
    (tmp_path / "clean.py").write_text("x = 1\n")

    def ruff(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [RUFF, "check", "--no-cache", "--select", "F401", *args], cwd=tmp_path, capture_output=True, text=True
        )

    quoted = " ".join(cell for cell, _ in ruff_table())
    found = ruff("a.py")
    assert found.stdout.endswith("[*] 1 fixable with `--fix`.\n") and "fixable with `--fix`.``" in quoted
    diff = ruff("--diff", "a.py")
    assert diff.stdout.endswith("Would fix 1 error.\n") and diff.stderr == "" and "`Would fix N errors.`" in quoted
    assert ruff("--diff", "clean.py").stdout == "" and "nothing on a clean diff" in quoted
    unselected = ruff("nosuch.py", "a.py")  # E902 is not among --select F401
    assert (
        unselected.stderr.startswith("warning: Failed to lint nosuch.py: ")
        and "`warning: Failed to lint PATH:" in quoted
    )
    fixed = subprocess.run(
        [RUFF, "check", "--no-cache", "--select", "F401", "--fix", "-"],
        input="import os\n",
        capture_output=True,
        text=True,
    )
    assert fixed.stdout == "" and fixed.stderr == "Found 1 error (1 fixed, 0 remaining).\n"


def test_the_tours_statistics_hold_on_a_fresh_clone():
    """The Tour's ``--statistics`` line names files no ``--fix`` of the Quick start writes (it
    shows ``--diff`` alone), so it holds whether or not a reader typed that first."""
    from tests.cli_support import offload_fixer

    script = readme_script()
    import jax

    if jax.__version__ != script.pinned_jax() or not jax_compat.host_memory_on_this_backend():
        pytest.skip(f"the transcripts are made with jax {script.pinned_jax()} (this is {jax.__version__})")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^\$ offload-fixer (check --statistics \S+)\n(.*?)^(?:\$|```)", readme, re.M | re.S)
    assert match, "the Tour has no check --statistics transcript"
    proc = offload_fixer(*match.group(1).split(), JAX_PLATFORMS="cpu")
    assert proc.stdout == match.group(2)
    quick_start_fixes = re.findall(r"^\$ \S*offload-fixer run --fix (\S+)$", readme, re.M)
    assert not any(path.startswith(match.group(1).split()[-1]) for path in quick_start_fixes)


def test_the_ruff_table_names_only_options_that_exist():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ours = "\n".join(ours for _, ours in ruff_table())
    options = {opt for command in main.commands.values() for param in command.params for opt in param.opts}
    options |= {opt for param in main.params for opt in param.opts}
    named = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", ours)) - {"-"}
    assert named and named <= options, named - options
    for key in re.findall(r"`([a-z-]+)`", ours):
        if key in ("exclude", "extend-exclude", "per-file-ignores"):
            assert f"{key} =" in readme or f".{key}]" in readme  # shown in the Configuration example
