"""Reading a source file for fixing: bytes, their hash, text and libcst module, each
failure as its own :class:`~offload_fixer.fixes.errors.FixError`."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import libcst as cst

from offload_fixer.fixes.errors import (
    SourceChangedError,
    SourceEncodingError,
    SourceReadError,
    SourceSyntaxError,
)
from offload_fixer.source.decoding import SourceDecodeError, decode


def read_source(path: str) -> bytes:
    """The Python to fix: a file's bytes, or a notebook's code cells as one program; a FIFO
    or device is refused by its type before anything is read."""
    from offload_fixer.notebook import NotebookError, read_program_bytes

    try:
        return read_program_bytes(path)
    except OSError as exc:
        raise SourceReadError(path, f"cannot read: {exc.strerror or exc}") from exc
    except NotebookError as exc:
        raise SourceReadError(path, str(exc)) from exc


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_fresh(path: str, data: bytes, analysed: Iterable[str | None]) -> None:
    """Refuse to fix ``data`` unless it is the text the plans were made from (``analysed``:
    their sources' SHA-256, None where a plan does not know it)."""
    digest = sha256_of(data)
    if any(expected and expected != digest for expected in analysed):
        raise SourceChangedError(path, "changed since it was analysed; analyse it again before fixing")


def decode_source_with_encoding(path: str, data: bytes) -> tuple[str, str]:
    """``(text, encoding)`` as CPython decodes the file (BOM, coding cookie, any line ends)."""
    try:
        return decode(data)
    except SourceDecodeError as exc:
        raise SourceEncodingError(path, f"line {exc.line}: {exc.message}") from exc


def decode_source(path: str, data: bytes) -> str:
    return decode_source_with_encoding(path, data)[0]


def parse_source(path: str, source: bytes | str) -> cst.Module:
    """Parse with libcst (bytes are decoded first, as CPython would); where it fails,
    CPython's own message and position are clearer."""
    text = decode_source(path, source) if isinstance(source, bytes) else source
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        try:
            compile(text, path, "exec", dont_inherit=True)
        except SyntaxError as python_error:
            raise SourceSyntaxError(
                path,
                f"does not parse: {python_error.msg}",
                python_error.lineno or exc.raw_line,
                python_error.offset or exc.raw_column + 1,
            ) from exc
        except (RecursionError, MemoryError, ValueError):
            pass
        raise SourceSyntaxError(
            path, f"libcst cannot parse it: {exc.message}", exc.raw_line, exc.raw_column + 1
        ) from exc
    except RecursionError as exc:
        raise SourceSyntaxError(path, "too deeply nested for libcst to parse", 1, 1) from exc
