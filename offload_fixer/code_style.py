"""The project's code style, as its formatter reads it: the line length a fix's lines keep to
and the quotes of the strings a fix adds.

Resolved like ruff: the nearest configuration at or above the file wins (``.ruff.toml``, then
``ruff.toml``, then a ``pyproject.toml`` with a ``[tool.ruff]`` table, in each directory; a
ruff file's ``extend`` is followed), and black's ``[tool.black]`` where a ``pyproject.toml``
has no ruff table. Ruff's ``line-length`` and ``[format] quote-style`` (``double``, ``single``,
``preserve``), black's ``line-length`` and ``skip-string-normalization`` (preserve), with
their defaults: 88 columns and double quotes. Where no formatter is configured, 88 columns and
the file's own quotes (most of its literals'): nothing says a formatter will make the file's
quotes one style, and a new literal should not be the odd one out. A file that cannot be read
or is not TOML counts as saying nothing (the formatter will say what is wrong with it); the
tool's own settings are :mod:`offload_fixer.config`'s.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_LINE_LENGTH = 88
RUFF_FILES = (".ruff.toml", "ruff.toml")
_QUOTES = {"double": '"', "single": "'", "preserve": None}


@dataclass(frozen=True)
class CodeStyle:
    line_length: int = DEFAULT_LINE_LENGTH
    quote: str | None = None
    """The quote of new string literals; ``None``: the file's own (most of its literals')."""
    source: Path | None = None
    """The configuration file it was read from; ``None``: the defaults."""


def code_style_for(path: str | os.PathLike[str]) -> CodeStyle:
    """The style of the file at ``path`` (one that does not exist yet: of its directory; ``-``
    or an empty path, source from stdin: of the working directory)."""
    name = os.fspath(path)
    start = Path(os.path.realpath(name if name not in ("", "-") else "."))
    directory = start if start.is_dir() else start.parent
    for folder in (directory, *directory.parents):
        for candidate in RUFF_FILES:
            table = _read(folder / candidate)
            if table is not None:
                return _ruff_style(table, folder / candidate)
        document = _read(folder / "pyproject.toml")
        tool = document.get("tool") if document is not None else None
        if isinstance(tool, dict) and isinstance(tool.get("ruff"), dict):
            return _ruff_style(tool["ruff"], folder / "pyproject.toml")
        if isinstance(tool, dict) and isinstance(tool.get("black"), dict):
            return _black_style(tool["black"], folder / "pyproject.toml")
    return CodeStyle()  # no formatter: the file's own quotes


def _ruff_style(table: dict[str, Any], path: Path, depth: int = 0) -> CodeStyle:
    """A ruff configuration's style, over the one its ``extend`` names (a path relative to it)."""
    base = CodeStyle(quote='"', source=path)
    extend = table.get("extend")
    if isinstance(extend, str) and depth < 8:
        parent = (path.parent / os.path.expanduser(extend)).resolve()
        document = _read(parent)
        if document is not None and parent.name == "pyproject.toml":
            tool = document.get("tool")
            document = tool.get("ruff") if isinstance(tool, dict) else None
        if isinstance(document, dict):
            base = _ruff_style(document, parent, depth + 1)
    length = table.get("line-length", base.line_length)
    layout = table.get("format")
    quote_style = layout.get("quote-style") if isinstance(layout, dict) else None
    return CodeStyle(
        line_length=_length(length),
        quote=_QUOTES[quote_style] if isinstance(quote_style, str) and quote_style in _QUOTES else base.quote,
        source=path,
    )


def _black_style(table: dict[str, Any], path: Path) -> CodeStyle:
    length = table.get("line-length", DEFAULT_LINE_LENGTH)
    return CodeStyle(
        line_length=_length(length),
        quote=None if table.get("skip-string-normalization") is True else '"',
        source=path,
    )


def _length(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else DEFAULT_LINE_LENGTH


def _read(path: Path) -> dict[str, Any] | None:
    """The TOML document at ``path``; None where there is no regular file or it is no TOML."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        if not path.is_file():
            return None
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return None
