"""Program coordinates -> cell coordinates, at the edge where findings are shown.

Inside the tool a notebook is one program (:mod:`.program`): the static check, suppression
comments and the fixes all count its lines. Only output speaks of cells: every span into a
notebook becomes ``Span(path, line-in-cell, col, cell=N)``, shown as ``nb.ipynb:cell N:L:C``.
"""

from __future__ import annotations

import dataclasses
import functools
import os

from offload_fixer.model import Diagnostic, Span

from .document import NotebookError, NotebookFile, is_notebook


def read_cached(path: str) -> NotebookFile | None:
    """The notebook at ``path`` as it is now (read again when it changes); None when it
    cannot be read, and then its spans stay as they are."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return _read(os.path.abspath(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=32)
def _read(path: str, _mtime_ns: int, _size: int) -> NotebookFile | None:
    try:
        return NotebookFile.read(path)
    except NotebookError:
        return None


def cell_span(span: Span | None) -> Span | None:
    """``span`` in cell coordinates when it points into a notebook in program coordinates."""
    if span is None or span.cell is not None or not is_notebook(span.path):
        return span
    notebook = read_cached(span.path)
    if notebook is None or not notebook.program.cells:
        return span
    try:
        cell, line = notebook.program.locate(span.line)
    except LookupError:
        return span
    end_line = None
    if span.end_line is not None:
        end_cell, end_line = notebook.program.locate(span.end_line)
        if end_cell is not cell:  # a range never crosses cells: clip it at the cell's end
            end_line = cell.line_count
    return dataclasses.replace(span, line=line, end_line=end_line, cell=cell.number)


def diagnostic_in_cells(diagnostic: Diagnostic) -> Diagnostic:
    """Every span of ``diagnostic`` (its own, the origin's, the trace's, the return's) in
    cell coordinates."""
    move = cell_span
    origin = diagnostic.origin
    if origin is not None and origin.span is not None:
        origin = dataclasses.replace(origin, span=move(origin.span))
    trace = tuple(dataclasses.replace(step, span=move(step.span)) if step.span else step for step in diagnostic.trace)
    function = diagnostic.function
    if function is not None and function.path and function.line and function.cell is None:
        located = move(Span(function.path, function.line))
        if located is not None and located.cell is not None:
            function = dataclasses.replace(function, line=located.line, cell=located.cell)
    return dataclasses.replace(
        diagnostic,
        span=move(diagnostic.span),
        origin=origin,
        trace=trace,
        return_span=move(diagnostic.return_span),
        function=function,
    )


def file_span(span: Span) -> Span:
    """A span in cell coordinates as a position in the ``.ipynb`` file's own text (what SARIF
    and GitHub annotations point at); unchanged when it is not in a notebook's cell."""
    if span.cell is None:
        return span
    notebook = read_cached(span.path)
    if notebook is None or span.cell not in notebook.sources:
        return span
    line, col = notebook.file_position(span.cell, span.line, span.col)
    end_line = end_col = None
    if span.end_line is not None and span.end_col is not None:
        end_line, end_col = notebook.file_position(span.cell, span.end_line, span.end_col)
    return dataclasses.replace(span, line=line, col=col, end_line=end_line, end_col=end_col, cell=None)


def cell_line_text(span: Span) -> str:
    """The text of the cell line a span in cell coordinates starts on."""
    notebook = read_cached(span.path) if span.cell is not None else None
    if notebook is None or span.cell is None:
        return ""
    try:
        lines = notebook.program.cell(span.cell).source.splitlines()
    except KeyError:
        return ""
    return lines[span.line - 1] if 0 < span.line <= len(lines) else ""
