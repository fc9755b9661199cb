"""Why a file could not be fixed. One class per cause, so the CLI can map them to exit
statuses and messages; all derive from :class:`FixError`. Each carries the file's path."""

from __future__ import annotations


class FixError(Exception):
    """A file the fixer refused or failed to rewrite; other files are still processed."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


class SourceChangedError(FixError):
    """The file's content differs from the one the diagnostics were computed on."""


class ReadOnlySourceError(FixError):
    """The file (or its directory) is not writable; nothing was written."""


class SourceReadError(FixError):
    """The file could not be read (missing, a directory, no permission)."""


class SourceEncodingError(FixError):
    """The bytes do not decode with the file's declared (or default UTF-8) encoding."""


class SourceSyntaxError(FixError):
    """The file does not parse; ``line``/``col`` (1-based) say where."""

    def __init__(self, path: str, message: str, line: int, col: int) -> None:
        super().__init__(path, f"{line}:{col}: {message}")
        self.line = line
        self.col = col


class FixVerificationError(FixError):
    """The rewritten text did not parse or compile; the file was left unchanged."""


class FixNotConvergedError(FixError):
    """Re-applying the fixes kept changing the file; the file was left unchanged."""


class FixNotConfirmedError(FixError):
    """``--confirm``: the released compiler still rejects the fixed function (or could not
    be asked about it); the file is left as it was."""


class OutsideScopeError(FixError):
    """The file is not one a fix may write (:mod:`offload_fixer.fixes.scope`): outside the
    project, reached through a symlink that leaves it, or not Python; nothing was written."""


class UnhashedSourceError(FixError):
    """A saved report holds no hash of the file as it was analysed, so a fix cannot tell it
    from a file changed since; nothing was written."""


NOTHING_WRITTEN = "nothing was written"
UNHASHED = (
    "the report holds no sha256 of this file as it was analysed, so it cannot be fixed safely; " + NOTHING_WRITTEN
)
