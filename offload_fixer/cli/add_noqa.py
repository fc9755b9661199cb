"""``check --add-noqa``: a ``# noqa: OFL…`` on each line a finding points at, as ruff writes it.

Each file is edited line by line in its own bytes: the directive goes at the end of the line
(merged into a ``# noqa: …`` already there), every other byte of the file is kept, and the
result is checked and written as a fix is (:func:`offload_fixer.fixes.apply.verify`,
:func:`~offload_fixer.fixes.apply.write_source`). A line that ends inside a string or with a
backslash cannot hold a comment: the directive goes to the line the string or the
continuation ends on.

A notebook is edited as the program of its code cells, as a fix is: the directive goes at the
end of the cell's line, and only the edited cells' ``source`` values change in the ``.ipynb``
text (:func:`offload_fixer.notebook.fixing.edit_notebook`).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable, Sequence
from typing import Any

from offload_fixer.model import Diagnostic
from offload_fixer.suppression import NOQA

_BYTES_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_NOQA_BYTES = re.compile(NOQA.pattern.encode(), re.IGNORECASE)
"""ruff's ``# noqa`` pattern over a line's bytes (every encoding CPython reads is ASCII-compatible)."""


def noqa_lines(diagnostics: Iterable[Diagnostic]) -> dict[str, dict[int, set[str]]]:
    """File -> line -> the codes of the findings whose underline starts on that line (a
    notebook's lines: its program's)."""
    from offload_fixer.notebook.positions import read_cached
    from offload_fixer.report import primary_span

    wanted: dict[str, dict[int, set[str]]] = {}
    for diagnostic in diagnostics:
        span = primary_span(diagnostic)
        if span is None or not span.path:
            continue
        line = span.line
        if span.cell is not None:
            notebook = read_cached(span.path)
            if notebook is None:
                continue  # unreadable now: reported when it is read to be edited
            try:
                line = notebook.program.program_line(span.cell, span.line)
            except KeyError:
                continue
        wanted.setdefault(span.path, {}).setdefault(line, set()).add(diagnostic.code)
    return wanted


def add_noqa(data: bytes, codes_by_line: dict[int, set[str]]) -> tuple[bytes, int]:
    """``data`` with the directives added, and how many lines got one."""
    from offload_fixer.source.decoding import decode

    text, _ = decode(data)
    comment_lines = _comment_line_of(text)
    lines = _BYTES_LINE.findall(data)
    moved: dict[int, set[str]] = {}
    for line, codes in codes_by_line.items():
        moved.setdefault(comment_lines.get(line, line), set()).update(codes)
    added = 0
    for line, codes in sorted(moved.items()):
        if not 1 <= line <= len(lines):
            continue
        raw = lines[line - 1]
        body = raw.rstrip(b"\r\n")
        ending = raw[len(body) :]
        existing = _NOQA_BYTES.search(body)
        if existing is not None and existing.group("codes") is None:
            continue  # a bare directive already silences every code on the line
        if existing is not None:
            have = set(re.split(rb"[,\s]+", existing.group("codes").strip().upper()))
            new = sorted(code for code in codes if code.encode() not in have)
            if not new:
                continue
            end = existing.end()
            body = body[:end] + b"".join(b", " + code.encode() for code in new) + body[end:]
        else:
            body = body + b"  # noqa: " + ", ".join(sorted(codes)).encode()
        lines[line - 1] = body + ending
        added += 1
    return b"".join(lines), added


def _comment_line_of(text: str) -> dict[int, int]:
    """Lines that cannot end with a comment -> the line where one can: the last line of a
    string spanning lines, the line a backslash continuation ends on."""
    moved: dict[int, int] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return moved
    for token in tokens:
        first, last = token.start[0], token.end[0]
        for line in range(first, last):
            moved[line] = last
    for index, token in enumerate(tokens[1:], 1):  # backslash continuations: a token's line skipped
        previous = tokens[index - 1]
        if token.start[0] > previous.end[0] and previous.type not in (tokenize.NEWLINE, tokenize.NL):
            for line in range(previous.end[0], token.start[0]):
                moved.setdefault(line, token.start[0])
    resolved = {}
    for line, target in moved.items():
        while target in moved and moved[target] != target:
            target = moved[target]
        resolved[line] = target
    return resolved


def write_noqa(diagnostics: Sequence[Diagnostic], console, unchecked: Sequence[Any] = (), scope: Any = None) -> int:
    """Add the directives to every file with findings; returns the number added. A file that
    cannot be edited, could not be checked (``unchecked``: the check's file errors) or leads
    out of ``scope`` (a :class:`~offload_fixer.fixes.scope.WriteScope`) when it is written, is
    named on stderr and left as it was."""
    from offload_fixer.fixes.apply import verify, write_source
    from offload_fixer.fixes.errors import FixError
    from offload_fixer.notebook import NotebookFile, is_notebook
    from offload_fixer.notebook.fixing import edit_notebook

    for error in unchecked:
        console.note(console.styled_error(f"offload-fixer: {error.path}: no noqa added: {error.message}"), always=True)
    total = 0
    for path, codes_by_line in sorted(noqa_lines(diagnostics).items()):
        try:
            if is_notebook(path):
                original = NotebookFile.read(path).program.data
            else:
                with open(path, "rb") as handle:
                    original = handle.read()
            data, added = add_noqa(original, codes_by_line)
            if not added:
                continue
            verify(path, data, original=original)
            if is_notebook(path):
                edit = edit_notebook(path, original, data.decode("utf-8"))
                write_source(path, edit.old_bytes, edit.new_bytes, scope=scope)
            else:
                write_source(path, original, data, scope=scope)
        except (OSError, FixError, ValueError) as exc:
            why = getattr(exc, "message", None) or getattr(exc, "strerror", None) or str(exc)
            console.note(console.styled_error(f"offload-fixer: {path}: no noqa added: {why}"), always=True)
            continue
        total += added
    return total
