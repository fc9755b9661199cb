"""A ``.ipynb`` read with nbformat, edited as text: positions in the file, byte-exact splices."""

from __future__ import annotations

import json
import re
import sys

import nbformat
import pytest

from offload_fixer.notebook import NotebookError, NotebookFile

from .notebooks import notebook, source_lines


def _file(tmp_path, nb, name="nb.ipynb", text=None):
    path = tmp_path / name
    path.write_text(text if text is not None else nbformat.writes(nb), encoding="utf-8")
    return NotebookFile.read(str(path))


def test_with_sources_changes_only_the_cell_source_lines(tmp_path):
    nb = notebook(["md:# Título", "import jax", "def f(x):\n    return x  # ünïcode"])
    file = _file(tmp_path, nb)
    new = file.with_sources({3: "def f(x):\n    x = jax.device_put(x)\n    return x  # ünïcode"})
    old_lines, new_lines = file.text.splitlines(keepends=True), new.splitlines(keepends=True)
    edited = source_lines(file.text, "cell-3")
    assert old_lines[: edited.start] == new_lines[: edited.start]
    assert old_lines[edited.stop :] == new_lines[edited.stop + 1 :]
    assert new_lines[edited.start + 2] == '    "    x = jax.device_put(x)\\n",\n'
    assert "ünïcode" in new  # written as the file writes it: UTF-8, not \\u escapes
    again = nbformat.reads(new, as_version=4)
    assert again.cells[2].source == "def f(x):\n    x = jax.device_put(x)\n    return x  # ünïcode"
    assert again.cells[2].outputs == nb.cells[2].outputs and again.metadata == nb.metadata


def test_single_string_sources_and_ascii_files_keep_their_spelling(tmp_path):
    nb = notebook(["x = 'é'", "y = 2"], outputs=False)
    document = nbformat.v4.nbjson.JSONWriter().writes(nb)
    data = json.loads(document)
    data["cells"][1]["source"] = "y = 2\nz = 3"
    text = json.dumps(data, indent=2, ensure_ascii=True)
    file = _file(tmp_path, nb, text=text)
    new = file.with_sources({2: "y = 20\nz = 3"})
    assert '"source": "y = 20\\nz = 3"' in new
    assert new.replace('"y = 20\\nz = 3"', '"y = 2\\nz = 3"') == text
    assert "\\u00e9" in new


def test_file_position_points_at_the_cell_text_in_the_json(tmp_path):
    file = _file(tmp_path, notebook(["md:text", 'a = "\\"quoted\\""\nb = jax.device_put(a)']))
    line, col = file.file_position(2, 2, 5)
    assert file.text.splitlines()[line - 1][col - 1 :].startswith("jax.device_put(a)")
    line, col = file.file_position(2, 1, 8)  # past the escaped backslash and quote
    assert file.text.splitlines()[line - 1][col - 1 :].startswith("quoted")
    line, col = file.file_position(2, 1, 6)
    assert file.text.splitlines()[line - 1][col - 1 :].startswith('\\\\\\"quoted')


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not a Jupyter notebook"),
        ('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5, "extra": 1}', "not a valid notebook"),
        ('{"nbformat": 3, "nbformat_minor": 0, "worksheets": [], "metadata": {}}', "nbformat 3"),
    ],
)
def test_what_is_not_a_notebook_is_refused_with_a_reason(tmp_path, text, message):
    with pytest.raises(NotebookError, match=message):
        _file(tmp_path, None, text=text)


# ---------------------------------------------------------------------------------------
# Read as Jupyter reads them; anything else one line, never a traceback
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": {}}', "'cells' is dict, not a list"),
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
        ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [7]}', "cell 1 is not a cell"),
        ('{"nbformat": 3, "metadata": {}, "worksheets": []}', "nbformat 3 notebooks are not supported"),
        ("[1, 2]", "the JSON is list, not an object"),
    ],
)
def test_unreadable_notebooks_are_one_line_errors(tmp_path, text, message):
    with pytest.raises(NotebookError, match=re.escape(message)):
        _file(tmp_path, None, text=text)


def test_an_older_minor_whose_cells_carry_ids_is_read_as_jupyter_does(tmp_path):
    nb = notebook(["import jax", "x = 1"], outputs=False)
    data = json.loads(nbformat.writes(nb))
    data["nbformat_minor"] = 4  # current Jupyter keeps an older minor and still writes ids
    file = _file(tmp_path, None, text=json.dumps(data))
    assert file.program.text == "import jax\nx = 1\n"


def test_a_notebook_of_another_language_is_skipped(tmp_path):
    from offload_fixer.notebook import NotPythonNotebook

    nb = notebook(["x = 1"], outputs=False)
    nb.metadata["kernelspec"] = {"name": "julia-1.10", "display_name": "Julia 1.10", "language": "julia"}
    nb.metadata["language_info"] = {"name": "julia"}
    with pytest.raises(NotPythonNotebook, match="julia"):
        _file(tmp_path, nb)


def test_notebooks_are_read_without_nbformat(tmp_path, monkeypatch):
    nb = notebook(["import jax", "x = 1"], outputs=False)
    text = nbformat.writes(nb)
    monkeypatch.setitem(sys.modules, "nbformat", None)  # as where the extra is not installed
    file = _file(tmp_path, None, text=text)
    assert file.program.text == "import jax\nx = 1\n"
    assert "".join(json.loads(file.with_sources({2: "x = 2"}))["cells"][1]["source"]) == "x = 2"


def test_a_markdown_cell_carrying_code_cell_keys_is_read_as_jupyter_opens_it(tmp_path):
    """Output strippers leave ``execution_count`` on markdown cells and drop code cells'
    ``outputs`` (flax's sst2 example, maxtext's demo notebooks): the schema refuses them,
    Jupyter opens the notebook."""
    cells = [
        {"cell_type": "markdown", "id": "a1", "metadata": {}, "source": ["# Title"], "execution_count": None},
        {"cell_type": "code", "id": "b2", "metadata": {}, "source": ["x = 1"], "execution_count": 1},  # no outputs
    ]
    text = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 4})
    file = _file(tmp_path, None, text=text)
    assert "x = 1" in file.program.data.decode()
    cells[1]["cell_type"] = "raw"  # a raw cell with outputs is refused: not what those writers leave
    cells[1]["bogus"] = 1
    with pytest.raises(NotebookError, match="not a valid notebook"):
        _file(tmp_path, None, text=json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 4}))
