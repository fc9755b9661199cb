"""Reading a source file for fixing: bytes, their hash, text and libcst module, each
failure as its own :class:`~offload_fixer.fixes.errors.FixError`."""

from __future__ import annotations

import hashlib
import io
import tokenize
from collections.abc import Iterable
from typing import TYPE_CHECKING

import libcst as cst

from offload_fixer.fixes.errors import (
    SourceChangedError,
    SourceEncodingError,
    SourceReadError,
    SourceSyntaxError,
)

if TYPE_CHECKING:
    from offload_fixer.fixes.planner import FixPlan


def read_source(path: str) -> bytes:
    """The Python to fix: a file's bytes, or a notebook's code cells as one program."""
    from offload_fixer.notebook import NotebookError, read_program_bytes

    try:
        return read_program_bytes(path)
    except OSError as exc:
        raise SourceReadError(path, f"cannot read: {exc.strerror or exc}") from exc
    except NotebookError as exc:
        raise SourceReadError(path, str(exc)) from exc


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_fresh(path: str, data: bytes, plans: Iterable[FixPlan]) -> None:
    digest = sha256_of(data)
    if any(p.source_sha256 and p.source_sha256 != digest for p in plans):
        raise SourceChangedError(path, "changed since it was analysed; analyse it again before fixing")


def decode_source(path: str, data: bytes) -> str:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except SyntaxError as exc:
        raise SourceEncodingError(path, f"bad encoding declaration: {exc}") from exc
    except LookupError as exc:
        raise SourceEncodingError(path, f"unknown encoding: {exc}") from exc
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SourceEncodingError(
            path, f"line {line}: byte {data[exc.start]:#04x} is not valid {exc.encoding} "
                  "(declare the file's encoding with a coding comment)") from exc


def encode_source(text: str, original: bytes) -> bytes:
    """``text`` in the encoding ``original`` was read with (its coding cookie or BOM)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(original).readline)
    return text.encode(encoding)


def parse_source(path: str, data: bytes | str) -> cst.Module:
    """Parse with libcst; where it fails, CPython's own message and position are clearer."""
    try:
        return cst.parse_module(data)
    except cst.ParserSyntaxError as exc:
        try:
            compile(data, path, "exec", dont_inherit=True)
        except SyntaxError as python_error:
            raise SourceSyntaxError(path, f"does not parse: {python_error.msg}", python_error.lineno or exc.raw_line,
                                    python_error.offset or exc.raw_column + 1) from exc
        raise SourceSyntaxError(path, f"libcst cannot parse it: {exc.message}", exc.raw_line, exc.raw_column + 1) from exc
