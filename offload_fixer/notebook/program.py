"""Code cells as one program, as a kernel runs them top to bottom, and back.

A jitted function defined in one cell and called with a sharding made in another is one
flow, so the static check and the fixes work on the concatenation of the code cells (each
masked by :mod:`.ipython_syntax`) and positions are mapped back per cell. After a fix, the
new program text is cut back into cells by a line diff against the old one: unchanged lines
keep their cell, changed lines go to the cell of the lines they replace (a cell whose lines end
in ``\r`` or ``\r\n`` keeps them: the program ends every line in ``\n``), and lines inserted
exactly between two cells go to the cell above when they are indented (the end of its
block) and to the cell below otherwise.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from offload_fixer.source.decoding import LINE_END, split_lines

from .ipython_syntax import MaskedCell, mask_cell


class CellSplitError(ValueError):
    """An edit of the program cannot be put back into cells (it spans two of them)."""


@dataclass(frozen=True)
class Cell:
    """One code cell in the program."""

    number: int
    """What users call it: its 1-based position in a notebook, or ``In [N]`` in a kernel."""
    source: str
    """The cell's text as written."""
    masked: MaskedCell | None
    """Its text as Python; None when it is left out (a cell magic)."""
    first_line: int
    """1-based program line of the cell's first line (its would-be place when left out)."""
    line_count: int
    """Lines the cell takes in the program (0 when left out or empty)."""

    @property
    def last_line(self) -> int:
        return self.first_line + self.line_count - 1


class Program:
    """The concatenation of code cells and the map between its lines and the cells'."""

    def __init__(self, cells: Iterable[tuple[int, str]]) -> None:
        built: list[Cell] = []
        pieces: list[str] = []
        line = 1
        placeholders = 0
        for number, source in cells:
            masked = mask_cell(_newlines(source), placeholders)
            text = masked.python if masked is not None else ""
            if masked is not None:
                placeholders += len(masked.commands)
            if text and not text.endswith("\n"):
                text += "\n"
            count = text.count("\n")
            built.append(Cell(number, source, masked, line, count))
            pieces.append(text)
            line += count
        self.cells: tuple[Cell, ...] = tuple(built)
        self.text = "".join(pieces)
        self._owner = [i for i, cell in enumerate(self.cells) for _ in range(cell.line_count)]

    @property
    def data(self) -> bytes:
        """The program as the bytes the static check hashes and the fixer reads."""
        return self.text.encode("utf-8")

    def cell(self, number: int) -> Cell:
        for cell in self.cells:
            if cell.number == number:
                return cell
        raise KeyError(f"no code cell {number}")

    def locate(self, line: int) -> tuple[Cell, int]:
        """Program line (1-based) -> (cell, 1-based line in it). A line past the end (a
        parse error at the end of the text) belongs to the last line of the last cell."""
        if not self._owner:
            raise LookupError("the notebook has no code")
        clamped = min(max(line, 1), len(self._owner))
        cell = self.cells[self._owner[clamped - 1]]
        return cell, clamped - cell.first_line + 1

    def program_line(self, number: int, line: int) -> int:
        """1-based line of a cell -> program line."""
        return self.cell(number).first_line + line - 1

    def split(self, new_text: str) -> dict[int, str]:
        """The new source of every cell an edit of the program changed, by cell number."""
        old = _lines(self.text)
        new = _lines(new_text)
        assigned: list[list[str]] = [[] for _ in self.cells]
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for offset, j in enumerate(range(j1, j2)):
                    assigned[self._owner[i1 + offset]].append(new[j])
            elif tag == "replace":
                owners = set(self._owner[i1:i2])
                if len(owners) > 1:
                    raise CellSplitError("a fix changes lines of two cells at once")
                assigned[owners.pop()].extend(new[j1:j2])
            elif tag == "insert":
                assigned[self._insertion_owner(i1, new[j1])].extend(new[j1:j2])
        changed: dict[int, str] = {}
        for index, cell in enumerate(self.cells):
            if cell.masked is None:
                continue
            python = "".join(assigned[index])
            old_python = "".join(old[cell.first_line - 1 : cell.last_line]) if cell.line_count else ""
            if python == old_python:
                continue
            if not _newlines(cell.source).endswith("\n") and python.endswith("\n"):
                python = python[:-1]
            try:
                source = cell.masked.restore(python)
            except ValueError as exc:
                raise CellSplitError(str(exc)) from exc
            if "\r" in cell.source:  # the cell's own line ends where the fix kept its lines
                source = _own_line_ends(cell.source, source)
            if source != cell.source:
                changed[cell.number] = source
        return changed

    def _insertion_owner(self, index: int, first_inserted: str) -> int:
        if not self._owner:
            raise CellSplitError("the notebook has no code cell to put the fix in")
        if index == 0:
            return self._owner[0]
        if index >= len(self._owner):
            return self._owner[-1]
        above, below = self._owner[index - 1], self._owner[index]
        if above == below:
            return above
        indented = first_inserted[:1] in (" ", "\t") and first_inserted.strip()
        return above if indented else below


def _newlines(source: str) -> str:
    """A cell's source with every line ended by ``\\n``: Python ends lines at ``\\r`` and
    ``\\r\\n`` too, so a cell written with them has as many lines as the kernel runs."""
    return LINE_END.sub("\n", source) if "\r" in source else source


def _own_line_ends(source: str, edited: str) -> str:
    """``edited`` (an edit of ``_newlines(source)``) with ``source``'s own line ends: its lines
    where they are unchanged, its first line end on the lines the edit wrote."""
    own = split_lines(source)
    plain = [line.rstrip("\r\n") for line in own]
    new = _lines(edited)
    end = LINE_END.search(source)
    newline = end.group() if end else "\n"
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, plain, [line.rstrip("\n") for line in new], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.extend(own[i1:i2])
        else:
            out.extend(line[:-1] + newline if line.endswith("\n") else line for line in new[j1:j2])
    if out and not edited.endswith("\n") and out[-1] != out[-1].rstrip("\r\n"):
        out[-1] = out[-1].rstrip("\r\n")
    return "".join(out)


def _lines(text: str) -> list[str]:
    """Lines cut where :class:`Program` counts them (at ``\\n``: cells are joined with it)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def code_cells(cells: Sequence[dict]) -> list[tuple[int, str]]:
    """(1-based position, source) of each code cell of nbformat cells (markdown and raw
    cells count in the numbering, as a notebook's readers count them)."""
    found = []
    for position, cell in enumerate(cells, 1):
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            found.append((position, source if isinstance(source, str) else "".join(source)))
    return found
