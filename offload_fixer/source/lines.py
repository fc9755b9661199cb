"""Lines as ``ast`` and libcst count them: where they end, and where a statement's start."""

from __future__ import annotations

import ast
import re

NEWLINE = re.compile(r"\r\n?|\n")
"""A line end: ``\\r\\n``, ``\\r`` or ``\\n`` (universal newlines)."""


def count_line_ends(text: str, start: int = 0, end: int | None = None) -> int:
    """How many :data:`NEWLINE` line ends ``text[start:end]`` holds: counted by ``str.count``
    where it holds no ``\\r`` (a language server counts every chunk of a document per version)."""
    end = len(text) if end is None else end
    if text.find("\r", start, end) < 0:
        return text.count("\n", start, end)
    return len(NEWLINE.findall(text, start, end))


def first_line(statement: ast.stmt) -> int:
    """The line a statement starts on: its first decorator's, where it has one."""
    decorators = getattr(statement, "decorator_list", ())
    return min(statement.lineno, *(d.lineno for d in decorators)) if decorators else statement.lineno


def lines_before(statement: ast.stmt, text: str) -> int:
    """The number that ``statement``'s ``ast``, the first statement of the chunk ``text``,
    gives the line before the chunk's first: its own first line less the blank and comment
    lines above it in the chunk (a document's outline keeps the statements of earlier
    versions, numbered as they were)."""
    above = 0
    start = 0
    for match in NEWLINE.finditer(text):
        code = text[start : match.start()].strip()
        if code and not code.startswith("#"):
            break
        above += 1
        start = match.end()
    return first_line(statement) - 1 - above
