"""A fixed program written back into its notebook: the edited cells' sources, nothing else.

The fixer (``offload_fixer.fixes.apply``) runs the codemods on a notebook's program like on
any file; this turns the new program into the new ``.ipynb`` text and a diff per cell.
"""

from __future__ import annotations

from dataclasses import dataclass

from offload_fixer.fixes.errors import FixVerificationError, SourceChangedError, SourceReadError
from offload_fixer.source.diffs import unified_diff

from .document import NotebookError, NotebookFile
from .program import CellSplitError


@dataclass(frozen=True)
class NotebookEdit:
    old_bytes: bytes
    """The file as read now: the atomic write refuses it if it changes before the rename."""
    new_bytes: bytes
    sources: dict[int, str]
    """New source of each changed cell, by cell position."""
    diff: str
    """A unified diff per changed cell, headed ``a/nb.ipynb:cell N`` (as ruff shows them)."""


def edit_notebook(path: str, analysed: bytes, new_program: str) -> NotebookEdit:
    """The notebook at ``path`` with ``new_program`` (an edit of the program ``analysed``)
    put back into its cells."""
    try:
        notebook = NotebookFile.read(path)
    except NotebookError as exc:
        raise SourceReadError(path, str(exc)) from exc
    if notebook.program.data != analysed:
        raise SourceChangedError(path, "its code cells changed while it was being fixed; nothing was written")
    try:
        sources = notebook.program.split(new_program)
        text = notebook.with_sources(sources)
    except (CellSplitError, NotebookError) as exc:
        raise FixVerificationError(path, f"{exc}; left unchanged") from exc
    diff = "".join(
        unified_diff(f"{path}:cell {number}", notebook.program.cell(number).source, source)
        for number, source in sorted(sources.items())
    )
    return NotebookEdit(notebook.text.encode("utf-8"), text.encode("utf-8"), sources, diff)
