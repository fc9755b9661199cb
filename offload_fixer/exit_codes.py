"""Exit codes of every ``offload-fixer`` command: one meaning each, documented in the README."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    CLEAN = 0
    """Nothing found (or only ``info`` notes)."""
    FINDINGS = 1
    """Diagnostics found, or ``--diff`` has changes pending."""
    USAGE = 2
    """Bad command line or configuration."""
    PROGRAM_FAILED = 3
    """``run``: the user's own program exited non-zero or raised."""
    INPUT_ERROR = 4
    """A file that does not parse, is not UTF-8, or a report/log that cannot be read."""
    FIX_REFUSED = 5
    """A fix was refused: read-only file, file changed since analysis, or the result would not compile."""
    UNSUPPORTED_JAX = 6
    """The installed or requested JAX version is one offload-fixer does not model."""
    NO_COMPILER = 7
    """``--confirm``: the released compiler of the target is not installed (or does not start)."""
    INTERRUPTED = 130
    """Interrupted with Ctrl-C (SIGINT), the shell's 128 + 2; ``run``: the program was."""
    TERMINATED = 143
    """Stopped by SIGTERM (128 + 15); a fix being written is left as it was."""
