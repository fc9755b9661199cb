"""Notebooks for the tests, written by nbformat the way Jupyter saves them."""

from __future__ import annotations

import base64
from pathlib import Path

import nbformat

MARKDOWN = "md:"
"""A cell text starting with this is a markdown cell."""

IMPORTS = "import jax\nfrom jax.sharding import SingleDeviceSharding"
HOST = 'host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")'
SCALE = "def scale(x):\n    return x * 2"
JIT_SITE = "scale_on_host = jax.jit(scale, in_shardings=host)"
TYPED = "0.10.2"
"""The JAX whose rules the static tests use, whatever is installed (nothing is executed)."""

PNG = base64.b64encode(bytes(range(256)) * 8).decode()


def notebook(cells: list[str], outputs: bool = True) -> nbformat.NotebookNode:
    """Code cells (markdown ones prefixed with ``md:``), each code cell with an execution
    count and, when ``outputs``, a stream and an image output as Jupyter stores them."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    count = 0
    for index, text in enumerate(cells):
        if text.startswith(MARKDOWN):
            cell = nbformat.v4.new_markdown_cell(text[len(MARKDOWN) :])
        else:
            count += 1
            cell = nbformat.v4.new_code_cell(text, execution_count=count)
            if outputs:
                cell.outputs = [
                    nbformat.v4.new_output("stream", name="stdout", text=f"ran cell {index + 1} — ok\n"),
                    nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"}),
                ]
            cell.metadata["tags"] = ["offload"]
        cell.id = f"cell-{index + 1}"
        nb.cells.append(cell)
    return nb


def write(path: Path, cells: list[str], outputs: bool = True) -> Path:
    path.write_text(nbformat.writes(notebook(cells, outputs)), encoding="utf-8")
    return path


def source_lines(text: str, cell_id: str) -> range:
    """0-based line numbers of a cell's ``"source": [...]`` list in nbformat's layout (one
    string per line), found from the text alone."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f'"id": "{cell_id}",')
    while lines[start].strip() != '"source": [':
        start += 1
    end = start
    while lines[end].strip() not in ("]", "],"):
        end += 1
    return range(start, end + 1)
