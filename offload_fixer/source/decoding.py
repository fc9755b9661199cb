"""Python source bytes read the way CPython reads them: the encoding (BOM, a PEP 263 cookie
on one of the first two lines, else UTF-8), the lines, whatever ends them, and the names.

``tokenize.detect_encoding`` reads lines with ``readline``, which splits on ``\\n`` only: a
file whose lines end in a lone ``\\r`` is one "line" to it, so a coding cookie there is
checked against the whole file and refused. CPython itself ends lines at ``\\r\\n``, ``\\r``
or ``\\n`` and runs such files, so the lines are cut here the same way first.

CPython's tokenizer folds every identifier to its NFKC form (PEP 3131): an italic ``h``
(U+210E), a fullwidth one (U+FF48) and ``h`` are one variable, ``first`` spelled with the
``fi`` ligature (U+FB01) is ``first``, and ``device_put`` in fullwidth letters is ``device_put``.
``ast`` shows the folded names; libcst keeps the text as written. So the text libcst is given
(:func:`libcst_view`) spells every identifier folded (:func:`python_spelling`), and every
comparison of names, in the static check and in the fixes, is one of names as Python reads
them. Strings, comments and bytes keep their code points: they are data, which Python does
not fold. A fix's lines go back into the file with each identifier spelled as the file
spells it (:func:`spelled_as_written`).
"""

from __future__ import annotations

import codecs
import errno
import os
import re
import stat
import tokenize
import unicodedata
from collections.abc import Iterator, Sequence

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
    """``text`` as libcst should read it, the same program for CPython: each identifier
    spelled as Python reads it (:func:`python_spelling`), and each line whose indentation
    holds a form feed cut to the indentation after its last one (lines inside a multi-line
    string are left alone), which libcst prints back as it is. ``text`` itself where it has
    neither (or does not tokenize)."""
    return python_spelling(form_feeds_cut(text))


def form_feeds_cut(text: str) -> str:
    """The form-feed part of :func:`libcst_view`: identifiers left as written."""
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


# ---------------------------------------------------------------------------------------
# Names as Python reads them
def python_spelling(text: str) -> str:
    """``text`` with each identifier replaced by its NFKC form, as CPython reads it; ``text``
    itself where none changes (nearly every file: ASCII, or normalized already) or where it
    does not tokenize. Lines and their ends stay as they are."""
    if not _may_fold_a_name(text):
        return text
    lines = split_lines(text)
    changed = False
    for token in reversed(list(_folded_names(lines))):
        row, column = token.start
        line = lines[row - 1]
        lines[row - 1] = line[:column] + _folded(token.string) + line[column + len(token.string) :]
        changed = True
    return "".join(lines) if changed else text


def spelled_as_written(text: str, original: str) -> list[str]:
    """The lines of ``text`` (a fix of ``python_spelling(original)``), each identifier that
    ``original`` spells otherwise spelled as ``original`` does: the one way it spells that
    name (a name it spells several ways, or also as Python reads it, stays folded)."""
    lines = split_lines(text)
    if not _may_fold_a_name(original):
        return lines
    spellings: dict[str, set[str]] = {}
    for token in _names(split_lines(original)):
        spellings.setdefault(_folded(token.string), set()).add(token.string)
    written = {folded: found.pop() for folded, found in spellings.items() if len(found) == 1 and folded not in found}
    if not written:
        return lines
    for token in reversed([t for t in _names(lines) if t.string in written]):
        row, column = token.start
        line = lines[row - 1]
        lines[row - 1] = line[:column] + written[token.string] + line[column + len(token.string) :]
    return lines


def _may_fold_a_name(text: str) -> bool:
    """Whether some character of ``text`` that NFKC changes may be part of a name (the
    tokenizer is asked only then: an ellipsis, a non-breaking space or a superscript in a
    docstring changes under NFKC too, but is never a name's)."""
    if text.isascii() or unicodedata.is_normalized("NFKC", text):
        return False
    return any(
        not unicodedata.is_normalized("NFKC", character) and f"_{character}".isidentifier()
        for character in set(text)
        if not character.isascii()
    )


def _folded(name: str) -> str:
    return unicodedata.normalize("NFKC", name)


def _folded_names(lines: Sequence[str]) -> Iterator[tokenize.TokenInfo]:
    return (token for token in _names(lines) if not token.string.isascii() and _folded(token.string) != token.string)


def _names(lines: Sequence[str]) -> Iterator[tokenize.TokenInfo]:
    """The identifier tokens of ``lines`` (each ended in ``\\n`` for the tokenizer: rows and
    columns stay those of ``lines``); none where they do not tokenize."""
    feed = iter([line.rstrip("\r\n") + "\n" if line.endswith(("\r", "\n")) else line for line in lines])
    found = []
    try:
        for token in tokenize.generate_tokens(lambda: next(feed, "")):
            if token.type == tokenize.NAME:
                found.append(token)
    except (tokenize.TokenError, SyntaxError):
        return iter(())
    return iter(found)


def view_column(original_line: str, view_line: str, column: int) -> int:
    """The column (0-based) of ``original_line`` that ``column`` of ``view_line`` (its
    :func:`libcst_view`) stands for: past a cut prefix, and inside or after a name whose
    folded spelling is longer or shorter than the file's."""
    import difflib

    if original_line == view_line:
        return column
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, view_line, original_line, autojunk=False).get_opcodes():
        if i1 <= column < i2:
            return j1 + (column - i1 if tag == "equal" else min(column - i1, max(j2 - j1 - 1, 0)))
    return column + len(original_line) - len(view_line)
