"""Every mix of line ends in a notebook's cells (``\\n``, ``\\r``, ``\\r\\n``, or one per line),
as sources written whole or as lists of lines, with the last line ended or not: the finding
names the cell and line the move is written on, and the fix goes into that cell with every
cell's own line ends kept. A regression test: lone-CR cells were mapped to the wrong cell."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

from click.testing import CliRunner

from offload_fixer.cli import main

OLD = "0.4.26"
"""JAX's rules under which a move to host returned as a device output is error 1200."""
CELLS = (
    "import jax\nfrom jax.sharding import SingleDeviceSharding\n",
    'host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")\n',
    "@jax.jit\ndef step(x):\n    h = jax.device_put(x, host)\n    return x, h\n",
)
STYLES = ("\n", "\r", "\r\n", "mixed")
_END = re.compile(r"\r\n|\r|\n")


def _ended(cell: str, style: str, last_ended: bool) -> str:
    lines = cell.splitlines()
    ends = [("\n", "\r", "\r\n")[i % 3] if style == "mixed" else style for i in range(len(lines))]
    text = "".join(line + end for line, end in zip(lines, ends))
    return text if last_ended else text[: -len(ends[-1])]


def _notebook(sources: list[str], as_lines: bool) -> str:
    cells = [
        {
            "cell_type": "code",
            "id": f"c{number}",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", source) if as_lines else source,
        }
        for number, source in enumerate(sources, 1)
    ]
    cells.insert(1, {"cell_type": "markdown", "id": "m", "metadata": {}, "source": "Some words\r"})
    metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": cells}, indent=1)


def test_every_mix_of_line_ends_maps_to_the_cells_and_keeps_them(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    wrong = []
    for index, styles in enumerate(itertools.product(STYLES, repeat=len(CELLS))):
        as_lines, last_ended = bool(index % 2), bool(index // 2 % 2)
        sources = [_ended(cell, style, last_ended) for cell, style in zip(CELLS, styles)]
        path = tmp_path / "nb.ipynb"
        path.write_text(_notebook(sources, as_lines))
        found = CliRunner().invoke(
            main, ["check", "--no-cache", "--output-format", "concise", "--jax-version", OLD, path.name]
        )
        fixed = CliRunner().invoke(
            main, ["check", "--no-cache", "--fix", "--unsafe-fixes", "--jax-version", OLD, path.name]
        )
        after = [
            "".join(cell["source"]) for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"
        ]
        problems = []
        if "nb.ipynb:cell 4:3:9: OFL1200" not in found.output:  # cell 4: the markdown cell counts
            problems.append(f"finding: {found.output.splitlines()[:1]}")
        if fixed.exit_code != 0 or "out_shardings" not in after[2]:
            problems.append(f"fix: exit {fixed.exit_code}, cells {after!r}")
        for number, (old, new) in enumerate(zip(sources, after)):  # a cell may gain the fix's import
            ends = set(_END.findall(old)) or {"\n"}
            kept = number == 2 or set(_END.split(old)) <= set(_END.split(new))
            if not kept or set(_END.findall(new)) - ends:
                problems.append(f"a cell's lines or line ends: {old!r} -> {new!r}")
        if problems:
            wrong.append((styles, as_lines, last_ended, problems))
    assert wrong == []
