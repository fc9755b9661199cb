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
    unreadable: bool = False
    """The file could not be read at all (gone, a FIFO, a symlink loop): ``check`` reports it
    as a finding of :data:`~offload_fixer.codes.IO_ERROR`, not as a file that is not Python."""

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
    skipped: str | None = None
    """Why a file was not checked, for a note (a notebook whose kernel runs another language)."""
    dependencies: tuple[str, ...] = ()
    """Other modules of the project the check read for this file (absolute paths): the result
    holds while they are unchanged."""
    internal_error: str | None = None
    """The check itself failed on this file (:func:`internal_error_note`): a bug of
    offload-fixer, reported as a note; the other files' results stand."""


def internal_error_note(path: str, error: BaseException) -> str:
    """The one text of a failure of the check inside one file's analysis: what failed and
    where in offload-fixer, so the report of the bug can name it."""
    import traceback

    frames = [f for f in traceback.extract_tb(error.__traceback__) if "offload_fixer" in f.filename]
    where = ""
    if frames:
        filename = frames[-1].filename
        where = f" at {filename[filename.rindex('offload_fixer') :]}:{frames[-1].lineno}"
    return (
        f"{path}: internal error: offload-fixer's static check failed on this file "
        f"({type(error).__name__}: {error}{where}); its findings are missing, the other files are reported. "
        "Please report this bug with the file"
    )
