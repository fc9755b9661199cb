"""Code cells as one program: line maps both ways, and an edited program cut back into cells."""

from __future__ import annotations

import pytest

from offload_fixer.notebook.program import CellSplitError, Program, code_cells

from .notebooks import notebook

CELLS = [(2, "import jax\n!pip list"), (3, "%%time\nx = 1"), (4, "def f(x):\n    return x * 2\n"), (6, "y = f(1)")]


def test_cells_are_concatenated_in_order_and_cell_magics_left_out():
    program = Program(CELLS)
    assert program.text == "import jax\npass  # ipython-command 0\ndef f(x):\n    return x * 2\ny = f(1)\n"
    assert [(c.number, c.first_line, c.line_count) for c in program.cells] == [
        (2, 1, 2),
        (3, 3, 0),
        (4, 3, 2),
        (6, 5, 1),
    ]
    assert program.locate(4) == (program.cell(4), 2)
    assert program.locate(5)[0].number == 6
    assert program.program_line(4, 2) == 4


def test_code_cells_number_every_cell_of_the_notebook():
    nb = notebook(["md:# Title", "x = 1", "md:text", "y = 2"], outputs=False)
    assert code_cells(nb.cells) == [(2, "x = 1"), (4, "y = 2")]


def test_split_gives_each_edit_to_its_cell_and_keeps_missing_final_newlines():
    program = Program(CELLS)
    edited = program.text.replace("    return x * 2\n", "    x = jax.device_put(x)\n    return x * 2\n")
    edited = edited.replace("y = f(1)\n", "y = f(2)\n")
    assert program.split(edited) == {4: "def f(x):\n    x = jax.device_put(x)\n    return x * 2\n", 6: "y = f(2)"}


def test_insertions_between_cells_go_above_when_indented_else_below():
    program = Program([(1, "def f(x):\n    y = x"), (2, "z = f(1)")])
    indented = program.text.replace("    y = x\n", "    y = x\n    return y\n")
    assert program.split(indented) == {1: "def f(x):\n    y = x\n    return y"}
    top_level = program.text.replace("z = f(1)\n", "import jax\nz = f(1)\n")
    assert program.split(top_level) == {2: "import jax\nz = f(1)"}
    assert program.split("import numpy\n" + program.text) == {1: "import numpy\ndef f(x):\n    y = x"}


def test_ipython_lines_come_back_after_an_edit():
    program = Program([(1, "!nvidia-smi\ndef f(x):\n    %time y = x\n    return y")])
    edited = program.text.replace("    return y", "    return jax.device_put(y)")
    assert program.split(edited) == {1: "!nvidia-smi\ndef f(x):\n    %time y = x\n    return jax.device_put(y)"}


def test_an_edit_across_two_cells_is_refused():
    program = Program([(1, "a = 1"), (2, "b = 2")])
    with pytest.raises(CellSplitError):
        program.split("a = 10; b = 20\n")


def test_cells_ending_lines_in_lone_cr_count_the_lines_python_runs_and_keep_them():
    program = Program([(1, "import jax\r"), (2, "@jax.jit\rdef f(x):\r    return x\r"), (3, "y = f(1)\r\nz = 2")])
    assert program.locate(4) == (program.cell(2), 3)  # `return x` is in cell 2, not cell 3
    edited = program.text.replace("    return x\n", "    x = jax.device_put(x)\n    return x\n")
    assert program.split(edited) == {2: "@jax.jit\rdef f(x):\r    x = jax.device_put(x)\r    return x\r"}
