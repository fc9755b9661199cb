"""What the static check says of one file: its diagnostics, or why it could not be read."""

from __future__ import annotations

from dataclasses import dataclass

from offload_fixer.model import Diagnostic


@dataclass(frozen=True)
class ParseError:
    """A file the check could not read as Python: 1-based line and column."""

    path: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.message}"


@dataclass(frozen=True)
class StaticResult:
    """The check of one file: its diagnostics, or why it could not be read."""

    path: str
    diagnostics: tuple[Diagnostic, ...] = ()
    parse_error: ParseError | None = None
    analysed: bool = False
    """False when the prefilter showed the file cannot hold a host move the check models."""
    dependencies: tuple[str, ...] = ()
    """Other modules of the project the check read for this file (absolute paths): the result
    holds while they are unchanged."""
