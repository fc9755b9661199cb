"""Source bytes read as CPython reads them, and files refused by their type before reading."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from offload_fixer.source.decoding import (
    NotRegularFileError,
    SourceDecodeError,
    decode,
    detect_encoding,
    libcst_view,
    python_spelling,
    read_regular_file,
    spelled_as_written,
    split_lines,
    view_column,
)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_a_coding_cookie_is_read_whatever_ends_the_lines(newline: str) -> None:
    data = newline.join(["#!/usr/bin/env python", "# -*- coding: latin-1 -*-", "x = 'caf\xe9'", ""]).encode("latin-1")
    assert detect_encoding(data) == "iso-8859-1"
    text, encoding = decode(data)
    assert "caf\xe9" in text and encoding == "iso-8859-1"
    exec(compile(data, "cookie.py", "exec"), namespace := {})  # CPython agrees
    assert namespace["x"] == "caf\xe9"


def test_a_bom_is_kept_as_the_codec() -> None:
    assert decode(b"\xef\xbb\xbfx = 1\n") == ("x = 1\n", "utf-8-sig")


@pytest.mark.parametrize(
    ("data", "words", "where"),
    [
        ("x = 1\n".encode("utf-16"), "UTF-16", (1, 1)),
        (b"x = 1\nab\x00c\n", "NUL", (2, 3)),
        (b"x = 1\r\n# caf\xe9\n", "byte 0xe9", (2, 6)),
        (b"# caf\xe9\n", "byte 0xe9", (1, 6)),  # not UTF-8 on line 1 and no cookie: where, not "missing declaration"
        (b"# coding: klingon\n", "unknown encoding", (1, 1)),
    ],
)
def test_what_is_not_source_text_says_where(data: bytes, words: str, where: tuple[int, int]) -> None:
    with pytest.raises(SourceDecodeError) as caught:
        decode(data)
    assert words in caught.value.message and (caught.value.line, caught.value.col) == where


def test_lines_end_as_cpython_ends_them() -> None:
    assert split_lines("a\r\nb\rc\n\nd") == ["a\r\n", "b\r", "c\n", "\n", "d"]


def test_fifos_and_devices_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)  # no writer: reading would block forever
    zero = tmp_path / "zero.py"
    zero.symlink_to("/dev/zero")  # reading would never end
    for path, kind in ((fifo, "FIFO"), (zero, "character device"), (tmp_path, "directory")):
        with pytest.raises(NotRegularFileError) as caught:
            read_regular_file(path)
        assert kind in caught.value.strerror
    regular = tmp_path / "ok.py"
    regular.write_bytes(b"x = 1\n")
    assert read_regular_file(regular) == b"x = 1\n"


# ---------------------------------------------------------------------------------------
# Form feeds: what libcst reads
def test_libcst_view_cuts_form_feeds_in_indentation_as_cpython_counts_them():
    import ast

    import libcst as cst

    from offload_fixer.source.decoding import libcst_view

    text = 'x = 1\n\fdef f(x):\n \f    """doc\n\f  kept"""\n    \fy = 2\n'
    view = libcst_view(text)
    assert view == 'x = 1\ndef f(x):\n    """doc\n\f  kept"""\ny = 2\n'  # the string's own \f stays
    assert ast.dump(ast.parse(view)) == ast.dump(ast.parse(text))
    assert cst.parse_module(view).code == view
    assert libcst_view("def f():\n    return 1\n") == "def f():\n    return 1\n"


@pytest.mark.parametrize(
    "data", [b"x = 1\n", b"", b"\n\n\n", b"s = 'encoding'\n", b"\xe9 = 1\n", b"# -*- mode: python -*-\nx = 1\n"]
)
def test_without_a_cookie_or_a_bom_the_codec_is_utf8_as_the_tokenizer_says(data: bytes) -> None:
    """Without the word ``coding`` (nor a BOM) no cookie can be there: the answer comes without
    a tokenizer, and is what it says (or, for a first line that is not UTF-8 and so no cookie,
    UTF-8, whose decoding names the byte)."""
    import tokenize

    lines = iter(data.splitlines(keepends=True)[:2])
    try:
        said = tokenize.detect_encoding(lambda: next(lines, b""))[0]
    except SyntaxError:
        said = "utf-8"
    assert detect_encoding(data) == said == "utf-8"
    assert detect_encoding(b"# coding: latin-1\n" + data) == "iso-8859-1"  # a cookie is still read


# Names as Python reads them: written with escapes, as the look-alikes are hard to tell apart
ITALIC_H, FULLWIDTH_H, FI = "\u210e", "\uff48", "\ufb01"


def test_identifiers_are_folded_as_python_reads_them_and_nothing_else_is() -> None:
    text = f'{ITALIC_H} = "{ITALIC_H}"  # {FULLWIDTH_H}\r\nx = {FULLWIDTH_H} + {FI}rst\ry = b"h"\n'
    folded = python_spelling(text)
    assert folded == f'h = "{ITALIC_H}"  # {FULLWIDTH_H}\r\nx = h + first\ry = b"h"\n'
    namespace: dict = {"first": "!"}
    exec(compile(text, "names.py", "exec"), namespace)
    assert namespace["x"] == ITALIC_H + "!"  # one variable however it is spelled, and a string is data
    assert python_spelling("x = 1\n") == "x = 1\n"
    assert libcst_view(f"\f{FI}le = 1\n") == "file = 1\n"


def test_changed_lines_get_the_files_own_spelling_back() -> None:
    original = f"{ITALIC_H} = 1\nx = {ITALIC_H} + {FI}rst\nz = h\n"
    fixed = python_spelling(original).replace("z = h\n", "z = h * first\n")
    assert spelled_as_written(fixed, original) == [
        "h = 1\n",  # also spelled plain h: folded, as Python reads it
        "x = h + \ufb01rst\n",
        "z = h * \ufb01rst\n",
    ]


def test_a_view_column_is_the_files_column() -> None:
    original, view = f"    {FI}le = jax.device_put(x)", "    file = jax.device_put(x)"
    assert original[view_column(original, view, view.index("jax"))] == "j"
    assert view_column(original, view, view.index("file")) == original.index(FI)
    assert view_column("\f    x = 1", "    x = 1", 4) == 5
