"""``offload-fixer check`` on notebooks, as a user runs it: findings per cell in every format,
``--diff`` and ``--fix`` that touch nothing but the edited cells' source."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from offload_fixer.cli import main
from offload_fixer.exit_codes import ExitCode

from .notebooks import HOST, IMPORTS, JIT_SITE, SCALE, TYPED, source_lines, write

CELLS = [
    "md:# Scaling on host",
    "%load_ext offload_fixer\n" + IMPORTS,
    HOST,
    "md:The step",
    SCALE,
    "%%time\nslow = jax.jit(scale, in_shardings=host)",
    JIT_SITE + "\n!echo compiled",
]
"""The jit (cell 7) of a function defined in cell 5 with a sharding from cell 3."""


@pytest.fixture()
def project(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(f'[tool.offload-fixer]\njax-version = "{TYPED}"\n')
    return write(tmp_path / "train.ipynb", CELLS)


def check(*args: str):
    return CliRunner().invoke(main, ["check", *args], catch_exceptions=False)


def test_findings_name_the_cell_and_its_line(project):
    result = check("train.ipynb")
    assert result.exit_code == ExitCode.FINDINGS
    lines = result.output.splitlines()
    assert lines[0].startswith("train.ipynb:cell 7:1:32: OFL1200 [*] [error]")  # --fix fixes it
    assert "multiply (host compute) at train.ipynb:cell 5:2:12" in result.output
    assert "cell 6" not in result.output  # the %%time cell is not Python


def test_json_carries_cell_coordinates(project):
    document = json.loads(check("--format", "json", "train.ipynb").output)
    assert sorted(d["code"] for d in document["diagnostics"]) == ["OFL1200", "OFL1201"]  # the multiply on host too
    (diagnostic,) = [d for d in document["diagnostics"] if d["code"] == "OFL1200"]
    assert (diagnostic["span"]["cell"], diagnostic["span"]["line"], diagnostic["span"]["col"]) == (7, 1, 32)
    assert (diagnostic["return_span"]["cell"], diagnostic["return_span"]["line"]) == (5, 2)
    assert (diagnostic["function"]["cell"], diagnostic["function"]["line"]) == (5, 1)


def test_sarif_and_github_point_into_the_ipynb_text_and_name_the_cell(project):
    text = project.read_text().splitlines()
    sarif = json.loads(check("--format", "sarif", "train.ipynb").output)
    (result,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "OFL1200"]  # its OFL1201 beside it
    region = result["locations"][0]["physicalLocation"]["region"]
    assert text[region["startLine"] - 1][region["startColumn"] - 1 :].startswith("in_shardings=host)")
    assert text[region["endLine"] - 1][region["endColumn"] - 1 :].startswith(')\\n"')
    assert result["message"]["text"].startswith("In cell 7, line 1, column 32: ")
    assert (result["properties"]["cell"], result["properties"]["cellLine"]) == (7, 1)
    steps = result["codeFlows"][0]["threadFlows"][0]["locations"]
    multiply = next(s for s in steps if "multiply" in s["location"]["message"]["text"])
    where = multiply["location"]["physicalLocation"]["region"]
    assert text[where["startLine"] - 1][where["startColumn"] - 1 :].startswith("x * 2")

    (github,) = [
        line for line in check("--format", "github", "train.ipynb").output.splitlines() if "=OFL1200::" in line
    ]
    fields = dict(item.split("=", 1) for item in github.split(" ", 1)[1].split("::")[0].split(","))
    assert text[int(fields["line"]) - 1][int(fields["col"]) - 1 :].startswith("in_shardings=host)")
    assert github.split("::")[2].startswith("In cell 7, line 1, column 32: OFL1200")


def test_diff_shows_the_cell_and_writes_nothing(project):
    before = project.read_bytes()
    result = check("--diff", "train.ipynb")
    assert result.exit_code == ExitCode.FINDINGS
    # the argument moved where `scale` starts, and its scaled copy (the state) kept host at the jit
    assert " def scale(x):\n+    x = jax.device_put(x, jax.memory.Space.Device)\n     return x * 2\n" in result.output
    assert "--- a/train.ipynb:cell 7\n+++ b/train.ipynb:cell 7\n" in result.output
    assert "+scale_on_host = jax.jit(scale, in_shardings=host, out_shardings=host)\n !echo compiled\n" in result.output
    assert result.output.endswith("Would fix 2 problems.\n")  # OFL1200 and the multiply's OFL1201
    assert project.read_bytes() == before


def test_fix_rewrites_only_the_edited_cell_source(project):
    """The host argument is computed on (``x * 2``): moved to device in the function's cell,
    and the result it returns (the argument scaled: the state, as the source shows) kept host
    memory at the jit's cell; nothing else changes."""
    before = project.read_text()
    result = check("--fix", "train.ipynb")
    assert result.exit_code == ExitCode.CLEAN, result.output
    after = project.read_text()
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    function, jit = source_lines(before, "cell-5"), source_lines(before, "cell-7")
    last = function.stop - 2  # the cell's last source line, ``return x * 2``
    assert old[:last] == new[:last]
    assert new[last] == '    "    x = jax.device_put(x, jax.memory.Space.Device)\\n",\n'
    assert old[last : jit.start + 1] == new[last + 1 : jit.start + 2]
    assert new[jit.start + 2] == '    "scale_on_host = jax.jit(scale, in_shardings=host, out_shardings=host)\\n",\n'
    assert old[jit.start + 2 :] == new[jit.start + 3 :]
    fixed = nbformat.reads(after, as_version=4)
    nbformat.validate(fixed)
    assert (
        fixed.cells[4].source == "def scale(x):\n    x = jax.device_put(x, jax.memory.Space.Device)\n    return x * 2"
    )
    assert (
        fixed.cells[6].source == "scale_on_host = jax.jit(scale, in_shardings=host, out_shardings=host)\n!echo compiled"
    )
    original = nbformat.reads(before, as_version=4)
    assert [c.get("outputs") for c in fixed.cells] == [c.get("outputs") for c in original.cells]
    assert check("train.ipynb").exit_code == ExitCode.CLEAN


def test_a_fix_that_edits_another_cell_goes_there(project):
    # JAX 0.6.2 honours a move to device for a host in_shardings argument (0.7.1+ does not)
    result = check("--fix", "--strategy", "device", "--jax-version", "0.6.2", "train.ipynb")
    assert result.exit_code == ExitCode.CLEAN, result.output
    fixed = nbformat.reads(project.read_text(), as_version=4)
    first, moved, rest = fixed.cells[4].source.split("\n")
    assert (first, rest) == ("def scale(x):", "    return x * 2")
    assert moved.startswith("    x = jax.device_put(x, ")
    assert fixed.cells[6].source == JIT_SITE + "\n!echo compiled"


def test_a_suppression_comment_in_a_cell_is_honoured(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # the multiply's OFL1201 has its origin (in_shardings) in that statement too
    write(tmp_path / "nb.ipynb", [IMPORTS, HOST, SCALE, JIT_SITE + "  # offload-fixer: ignore[OFL1200, OFL1201]"])
    assert check("--jax-version", TYPED, "nb.ipynb").exit_code == ExitCode.CLEAN


def test_directories_include_notebooks_but_not_checkpoints(project, tmp_path):
    checkpoints = tmp_path / ".ipynb_checkpoints"
    checkpoints.mkdir()
    write(checkpoints / "train-checkpoint.ipynb", CELLS)
    result = check(".")
    assert result.exit_code == ExitCode.FINDINGS
    assert "train.ipynb:cell 7" in result.output and "checkpoint" not in result.output


def test_a_cell_that_does_not_parse_is_reported_in_its_cell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "nb.ipynb", [IMPORTS, "md:notes", HOST + "\nf = jax.jit(abs)\ndef broken(:\n    pass"])
    result = check("nb.ipynb")
    assert result.exit_code == ExitCode.INPUT_ERROR
    assert result.output.startswith("nb.ipynb:cell 3:3:")


def test_a_file_that_is_not_a_notebook_is_an_input_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.ipynb").write_text("{ not json")
    result = check("bad.ipynb")
    assert result.exit_code == ExitCode.INPUT_ERROR
    assert "bad.ipynb:1:1: error: not a Jupyter notebook" in result.output


def test_a_notebook_written_by_another_tool_is_fixed_in_its_own_layout(tmp_path, monkeypatch):
    """nbformat 4.4 without cell ids, two-space indentation, one string per source."""
    monkeypatch.chdir(tmp_path)
    cells = [
        {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [], "source": source}
        for source in (IMPORTS, HOST, SCALE, JIT_SITE)
    ]
    text = (
        json.dumps(
            {"metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 4, "cells": cells},
            indent=2,
        )
        + "\n"
    )
    path = tmp_path / "other.ipynb"
    path.write_text(text)
    result = check("--fix", "--jax-version", TYPED, "other.ipynb")
    assert result.exit_code == ExitCode.CLEAN, result.output
    assert "Warning" not in result.output
    fixed_jit = JIT_SITE.replace("=host)", "=host, out_shardings=host)")
    fixed_scale = SCALE.replace("\n", "\n    x = jax.device_put(x, jax.memory.Space.Device)\n", 1)
    assert path.read_text() == text.replace(json.dumps(JIT_SITE), json.dumps(fixed_jit)).replace(
        json.dumps(SCALE), json.dumps(fixed_scale)
    )


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_nbformat_validates_the_notebooks_the_check_analyses_and_only_those(project, tmp_path, jobs):
    """Schema validation is most of the cost of reading a notebook: a tree's notebooks that
    cannot hold a finding are read for their cells only, one that can is validated first (in
    a pool, by the worker that checks it)."""
    (tmp_path / "other.py").write_text(
        "import jax\n\nf = jax.jit(lambda v: jax.device_put(v, jax.memory.Space.Host))\n"
    )
    cells = [{"cell_type": "code", "source": IMPORTS, "metadata": {}, "outputs": [], "execution_count": None}]
    unrelated = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells, "extra": 1}
    (tmp_path / "plots.ipynb").write_text(json.dumps(unrelated))
    assert nbformat.validator.isvalid(unrelated) is False
    notebook = json.loads(project.read_text())
    notebook["extra"] = 1
    project.write_text(json.dumps(notebook))
    result = check("-j", jobs, ".")
    assert result.exit_code == ExitCode.INPUT_ERROR
    assert "train.ipynb:1:1: error: not a valid notebook" in result.output
    assert "plots.ipynb" not in result.output
