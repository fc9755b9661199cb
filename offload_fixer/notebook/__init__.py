"""Jupyter notebooks: the static check and its fixes on ``.ipynb`` files.

A notebook is checked as the program its kernel would run: its code cells concatenated
top to bottom (:class:`Program`), IPython's own syntax masked line for line. Diagnostics,
suppression comments and fixes count that program's lines; output maps them to cells
(``nb.ipynb:cell 3:12:5``, :mod:`.positions`), and a fix is written back into the edited
cells' ``source`` only, every other byte of the file unchanged (:class:`NotebookFile`).

Notebooks are read with the standard library; where nbformat is installed (the ``notebook``
extra) it converts and validates them as Jupyter does. A notebook whose kernel runs another
language is skipped with a note. The IPython extension (``%load_ext offload_fixer``) is
:mod:`offload_fixer.notebook.extension`.
"""

from .document import NotebookError, NotebookFile, NotPythonNotebook, is_notebook, read_program_bytes
from .program import CellSplitError, Program

__all__ = [
    "CellSplitError",
    "NotPythonNotebook",
    "NotebookError",
    "NotebookFile",
    "Program",
    "is_notebook",
    "read_program_bytes",
]
