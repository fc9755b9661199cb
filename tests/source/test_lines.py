"""Lines as ``ast`` and libcst count them."""

from __future__ import annotations

import ast

from offload_fixer.source.lines import NEWLINE, first_line, lines_before


def test_line_ends_are_universal_newlines():
    assert [m.group() for m in NEWLINE.finditer("a\nb\r\nc\rd")] == ["\n", "\r\n", "\r"]


def test_a_statement_starts_at_its_first_decorator():
    decorated, plain = ast.parse("@a\n@b(\n  1)\ndef f():\n    pass\nx = 1\n").body
    assert (first_line(decorated), decorated.lineno) == (1, 4)
    assert first_line(plain) == 6


def test_the_line_before_a_chunk_is_numbered_as_its_statement_is():
    """The chunk's blank and comment lines above its statement are counted back from the
    statement's line, whatever version of the file numbered it."""
    chunk = "\n# a comment\n  # indented\n\n@decorate\nclass A:\n    x = 1\n"
    (statement,) = ast.parse(chunk).body
    assert lines_before(statement, chunk) == 0
    ast.increment_lineno(statement, 40)  # numbered as an earlier version of the file had it
    assert lines_before(statement, chunk) == 40
