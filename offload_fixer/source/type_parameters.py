"""``ast`` trees of Python 3.12 code under Python 3.11: type parameters and ``type`` aliases.

The static check finds a file's statements with ``ast`` and parses only the ones it reads with
libcst (:mod:`offload_fixer.static.outline`). Under Python 3.11, ``ast`` refuses PEP 695's
``def f[T](...)``, ``class C[T]`` and ``type X = ...``, and such a file (JAX's own ``core.py``,
``config.py``, Pallas) was parsed whole with libcst: about a third of a second for each of
JAX's large modules, and none of it could be read as a project module.

Here ``ast`` parses a twin of the text, as long as the original, line for line and column for
column, where each refused construct is blanked: a type parameter list becomes spaces, and
``type X[T] = value`` becomes the annotation ``X      : value`` (a name bound by a statement
whose value is never run, as an alias's value is not). The twin's statements therefore sit
exactly where the original's do; libcst still parses the original text. Each construct is
found where CPython's parser stopped, and anything else it stops at (PEP 701 f-strings, a real
syntax error, brackets across lines) gives its own ``SyntaxError`` back, as ``ast.parse`` would.
"""

from __future__ import annotations

import ast
import re
import sys

from offload_fixer.source.lines import NEWLINE

_ATTEMPTS = 64
"""Constructs blanked in one text at most before giving up (each costs one parse)."""
_HEADER = re.compile(r"[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+\w+[ \t]*(?=\[)")
_ALIAS = re.compile(r"[ \t]*(type[ \t]+(\w+))[ \t]*")
_CONSTRUCT = re.compile(r"^[ \t]*(?:(?:async[ \t]+)?(?:def|class)[ \t]+\w+[ \t]*\[|type[ \t]+\w+)", re.MULTILINE)
"""A line that may start one: the first guess, before the parser's."""
_SPACES = re.compile(r"[ \t]*")
_OPENING, _CLOSING = "[({", "])}"


def parse(text: str, feature_version: tuple[int, int] | None = None, newer_syntax: bool = False) -> ast.Module:
    """``ast.parse(text, feature_version=...)``; with ``newer_syntax`` (a file that libcst's
    grammar judges, not this interpreter's) and no ``feature_version``, PEP 695's constructs
    are read as the module docstring says."""
    try:
        return ast.parse(text, feature_version=feature_version)
    except SyntaxError as refused:
        if not newer_syntax or feature_version is not None:
            raise
        return _twin_tree(text, refused)


def _twin_tree(text: str, refused: SyntaxError) -> ast.Module:
    """The ``ast`` of ``text``'s twin, after ``ast.parse(text)`` raised ``refused``; raises
    ``refused`` again where its twin does not parse either (or this Python reads PEP 695
    itself: then the refusal is for something else). Every line that starts like a construct
    is blanked at once (one more parse, where blanking each where the parser stops costs one
    per construct); what that misses, or a line a string holds, is left to the parser's word."""
    if sys.version_info >= (3, 12):
        raise refused
    twin = text
    for construct in _CONSTRUCT.finditer(text):
        twin = _blanked(twin, construct.start()) or twin
    for _ in range(_ATTEMPTS):
        try:
            return ast.parse(twin)
        except SyntaxError as error:
            start = None if error.lineno is None else _line_start(twin, error.lineno)
            blanked = None if start is None else _blanked(twin, start)
        if blanked is None:
            break
        twin = blanked
    raise refused


def _blanked(text: str, start: int) -> str | None:
    """``text`` with the construct on the line starting at ``start`` blanked; None when that
    line holds none (or one this cannot blank in place)."""
    header = _HEADER.match(text, start)
    if header is not None:
        end = _bracket_end(text, header.end())
        if end is None:
            return None
        return text[: header.end()] + " " * (end - header.end()) + text[end:]
    alias = _ALIAS.match(text, start)
    if alias is None:
        return None
    name = alias.group(2)
    equals = alias.end()
    if text.startswith("[", equals):
        closed = _bracket_end(text, equals)
        if closed is None:
            return None
        equals = _SPACES.match(text, closed).end()  # type: ignore[union-attr]
    if not text.startswith("=", equals) or text.startswith("==", equals):
        return None
    keyword = alias.start(1)
    replaced = name + " " * (equals - keyword - len(name)) + ":"
    return text[:keyword] + replaced + text[equals + 1 :]


def _line_start(text: str, lineno: int) -> int | None:
    """Offset of the 1-based line ``lineno`` as ``ast`` counts lines (``\\n``, ``\\r\\n``, ``\\r``)."""
    if lineno == 1:
        return 0
    for number, newline in enumerate(NEWLINE.finditer(text), start=2):
        if number == lineno:
            return newline.end()
    return None


def _bracket_end(text: str, opening: int) -> int | None:
    """The offset after the bracket closing the one at ``opening``, on the same line (strings
    skipped); None when it closes on another line or never."""
    depth = 0
    position = opening
    while position < len(text):
        char = text[position]
        if char in "\r\n#\\":
            return None
        if char in "'\"":
            closing = _string_end(text, position)
            if closing is None:
                return None
            position = closing
            continue
        if char in _OPENING:
            depth += 1
        elif char in _CLOSING:
            depth -= 1
            if depth == 0:
                return position + 1
        position += 1
    return None


def _string_end(text: str, quote_at: int) -> int | None:
    """The offset after a one-line string literal starting at ``quote_at``."""
    quote = text[quote_at]
    position = quote_at + 1
    while position < len(text):
        char = text[position]
        if char in "\r\n":
            return None
        if char == "\\":
            position += 2
            continue
        if char == quote:
            return position + 1
        position += 1
    return None
