"""Python source bytes read the way CPython reads them: the encoding (BOM, a PEP 263 cookie
on one of the first two lines, else UTF-8) and the lines, whatever ends them.

``tokenize.detect_encoding`` reads lines with ``readline``, which splits on ``\\n`` only: a
file whose lines end in a lone ``\\r`` is one "line" to it, so a coding cookie there is
checked against the whole file and refused. CPython itself ends lines at ``\\r\\n``, ``\\r``
or ``\\n`` and runs such files, so the lines are cut here the same way first.
"""

from __future__ import annotations

import codecs
import errno
import os
import re
import stat
import tokenize
from collections.abc import Sequence

NOTEBOOK_SUFFIX = ".ipynb"
"""A Jupyter notebook's file suffix (its program is read from its code cells)."""

LINE_END = re.compile(r"\r\n|\r|\n")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_BYTES_LINE_END = re.compile(rb"\r\n|\r|\n")
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=]")


class SourceDecodeError(ValueError):
    """Bytes that are not Python source text: 1-based ``line``/``col`` say where."""

    def __init__(self, message: str, line: int = 1, col: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col


class NotRegularFileError(OSError):
    """A path that is a FIFO, a device, a socket or a directory: refused before reading,
    since reading a FIFO without a writer, or ``/dev/zero``, never ends."""


def file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_regular_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a regular file (symlinks followed); :class:`NotRegularFileError` for any
    other kind, decided from the open descriptor, so opening never blocks and nothing is read."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(errno.EINVAL, f"is {file_kind(mode)}, not a regular file", os.fspath(path))
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(descriptor)


def split_lines(text: str) -> list[str]:
    """Lines with their ends (``\\r\\n``, ``\\r`` or ``\\n``), as CPython counts them."""
    return _LINE.findall(text)


def detect_encoding(data: bytes) -> str:
    """The codec CPython would decode ``data`` with (``utf-8-sig`` for a UTF-8 BOM).

    Raises :class:`SourceDecodeError` for a bad or unknown cookie, as CPython refuses them."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise SourceDecodeError(
            "UTF-16 or UTF-32 text (byte-order mark): Python source must be UTF-8 or another ASCII-compatible encoding"
        )
    if b"coding" not in data and not data.startswith(codecs.BOM_UTF8):
        return "utf-8"  # no cookie, no BOM: tokenize's answer, without a tokenizer (most files)
    first = _first_lines(data, 2)
    lines = iter(first)
    try:
        encoding, _ = tokenize.detect_encoding(lambda: next(lines, b""))
    except SyntaxError as exc:
        if not any(_COOKIE.match(line) for line in first):
            return "utf-8"  # no cookie, and a first line that is not UTF-8: decode() says which byte
        raise SourceDecodeError(exc.msg, exc.lineno or 1) from exc
    return encoding


def decode(data: bytes) -> tuple[str, str]:
    """``(text, encoding)``; :class:`SourceDecodeError` with the position of the first bad byte,
    or of a NUL byte (CPython refuses source that holds one: binary files, UTF-16 text)."""
    encoding = detect_encoding(data)
    nul = data.find(b"\0")  # in every ASCII-compatible encoding a NUL byte is a NUL character
    if nul >= 0:
        line, col = _position(data, nul)
        raise SourceDecodeError("source holds a NUL byte (a binary file, or UTF-16 text?)", line, col)
    try:
        text = data.decode(encoding)
    except LookupError as exc:
        raise SourceDecodeError(f"unknown encoding: {encoding}") from exc
    except UnicodeDecodeError as exc:
        line, col = _position(data, exc.start)
        raise SourceDecodeError(
            f"not valid {encoding}: byte 0x{data[exc.start]:02x} ({exc.reason}); "
            "declare the file's encoding with a coding comment",
            line,
            col,
        ) from exc
    return text, encoding


def encode(text: str, encoding: str) -> bytes:
    """The bytes of ``text`` in the file's own encoding (``utf-8-sig`` writes the BOM back)."""
    return text.encode(encoding)


def _first_lines(data: bytes, count: int) -> list[bytes]:
    lines: list[bytes] = []
    start = 0
    while len(lines) < count and start < len(data):
        end = _BYTES_LINE_END.search(data, start)
        stop = end.end() if end else len(data)
        lines.append(data[start:stop])
        start = stop
    return lines


def _position(text: str | bytes, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset``, lines ending as CPython ends them."""
    head = text[:offset]
    if isinstance(head, bytes):
        head = head.decode("latin-1")
    starts = [m.end() for m in LINE_END.finditer(head)]
    return len(starts) + 1, offset - (starts[-1] if starts else 0) + 1


# ---------------------------------------------------------------------------------------
# What libcst reads
_INDENT_CHARS = " \t\f"


def libcst_view(text: str) -> str:
    """``text`` with each line whose indentation holds a form feed cut to the indentation after
    its last one; lines inside a multi-line string are left alone. The same program for
    CPython, and one libcst prints back as it is. ``text`` itself where it has no form feed
    (or does not tokenize)."""
    if "\f" not in text:
        return text
    lines = split_lines(text)
    protected = _string_continuation_lines(lines)
    if protected is None:
        return text
    out = []
    for number, line in enumerate(lines, 1):
        body = line.lstrip(_INDENT_CHARS)
        indent = line[: len(line) - len(body)]
        if "\f" in indent and number not in protected:
            line = indent[indent.rindex("\f") + 1 :] + body
        out.append(line)
    return "".join(out)


def _string_continuation_lines(lines: Sequence[str]) -> set[int] | None:
    """1-based lines a multi-line string token continues onto (its whitespace is data);
    ``None`` for text that does not tokenize."""
    protected: set[int] = set()
    feed = iter(lines)
    opened: list[int] = []
    try:
        for token in tokenize.generate_tokens(lambda: next(feed, "")):
            kind = tokenize.tok_name.get(token.type, "")
            if kind == "FSTRING_START":
                opened.append(token.start[0])
            elif kind == "FSTRING_END" and opened:
                protected.update(range(opened.pop() + 1, token.end[0] + 1))
            elif token.type == tokenize.STRING and token.end[0] > token.start[0]:
                protected.update(range(token.start[0] + 1, token.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        return None
    return protected
