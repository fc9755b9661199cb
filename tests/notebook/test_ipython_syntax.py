"""IPython lines become ``pass`` placeholders, line for line, and come back after an edit."""

from __future__ import annotations

import ast

import pytest

from offload_fixer.notebook.ipython_syntax import mask_cell

CELL = """\
%matplotlib inline
!pip install -q optax
files = !ls data
t = %timeit -o f(x)
jax.jit?
??jax.device_put
def f(x):
    y = (x
!= 2)
    !echo inside
    return y
%config InlineBackend.figure_format = \\
    'retina'
"""


def test_every_ipython_line_is_masked_and_python_is_kept():
    masked = mask_cell(CELL)
    lines = masked.python.splitlines()
    original = CELL.splitlines()
    assert len(lines) == len(original)
    ast.parse(masked.python)
    kept = {6, 7, 8, 10}  # def, the bracketed `!=` continuation, return
    for index, (line, before) in enumerate(zip(lines, original)):
        if index in kept:
            assert line == before
        else:
            assert line.lstrip().startswith("pass  # ipython-command"), (index, line)
    assert lines[9] == "    pass  # ipython-command 6"  # indented like the shell escape it replaces


def test_restore_puts_the_commands_back_around_an_edit():
    masked = mask_cell(CELL)
    edited = masked.python.replace("    return y\n", "    y = jax.device_put(y)\n    return y\n")
    assert masked.restore(edited) == CELL.replace("    return y\n", "    y = jax.device_put(y)\n    return y\n")


def test_restore_refuses_an_edit_that_lost_a_command():
    masked = mask_cell("!nvidia-smi\nx = 1\n")
    with pytest.raises(ValueError, match="nvidia-smi"):
        masked.restore("x = 1\n")


def test_cell_magic_cells_are_left_out_and_numbers_stay_unique():
    assert mask_cell("%%time\nx = 1\n") is None
    assert mask_cell("  %%bash\necho hi") is None
    second = mask_cell("!ls\n", first_number=7)
    assert second.python == "pass  # ipython-command 7\n" and second.commands == {7: "!ls"}


def test_python_that_looks_like_a_command_is_not_masked():
    text = 'x = {"a": 1}\ns = "%d" % 3\nprint(x!=s)\n'
    assert mask_cell(text).python == text
