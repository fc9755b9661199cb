"""Exit codes of every ``offload-fixer`` command: one meaning each.

This is the only place they are written down: ``--help`` prints :func:`describe`, and a test
checks that the README's table says the same.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    meaning: str

    def __new__(cls, value: int, meaning: str) -> ExitCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    CLEAN = 0, "clean (only `info` notes), or `--fix` left nothing to report"
    FINDINGS = 1, "problems found (errors or warnings), or `--diff` has changes pending"
    USAGE = 2, "bad command line or configuration (an unknown option, an empty `--select`, a non-Python file named)"
    PROGRAM_FAILED = 3, "`run`: your program itself failed (its own traceback is shown)"
    INPUT_ERROR = (
        4,
        (
            "an input that cannot be read: a missing or unreadable program, report or log, a FIFO or device "
            "(refused by its type, never read); a file that does not parse, that CPython cannot compile or "
            "that is not text (binary, UTF-16, undecodable). A path `check` cannot read is an OFL0902 "
            "finding instead (exit 1), as ruff's E902"
        ),
    )
    FIX_REFUSED = (
        5,
        ("a fix was refused: read-only or append-only file, file changed since analysis, result would not compile"),
    )
    UNSUPPORTED_JAX = 6, "a JAX version offload-fixer does not model (installed, `--jax-version` or `jax-version`)"
    NO_COMPILER = (
        7,
        "`--confirm`: the released compiler of the target is not installed (or does not start); "
        "`--topology`: libtpu is not installed",
    )
    INTERRUPTED = 130, "interrupted (Ctrl-C: 128 + SIGINT); `run` prints what it found before the program was"
    TERMINATED = 143, "terminated (128 + SIGTERM); a file being fixed is left as it was or fully fixed"


def worse_failure(first: ExitCode | None, second: ExitCode | None) -> ExitCode | None:
    """A refused fix (5) outranks the other failures of fixing; else the first one."""
    return ExitCode.FIX_REFUSED if ExitCode.FIX_REFUSED in (first, second) else (first or second)


def describe() -> str:
    """One line per code, for ``--help``."""
    return "\n".join(f"{int(code)}  {code.meaning.replace('`', '')}" for code in ExitCode)
