"""``offload-fixer`` as a process of its own: the installed command and ``python -m
offload_fixer``, as opposed to :func:`offload_fixer.cli.main` called in another process (a
test's ``CliRunner``, a notebook).

A static check ends its process without Python's teardown, as mypy does: the exit handlers
run (a pool's, the standard library's), then the process ends, where the teardown would
clear every module and collect every object the check left alive (libcst's classes, the
project's modules): 60 ms of a 0.45 s one-file check with a finding. Only ``check`` asks for
it: ``run`` executes the user's program, whose objects' finalizers must run as Python runs them.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Callable

_state = {"own_process": False, "end_at_exit": False}


def run_as_process(command_line: Callable[[], object]) -> None:
    """Run the command line (click's, which ends in ``SystemExit``), then end the process."""
    _state["own_process"] = True
    try:
        command_line()
    except SystemExit as exc:
        if not _state["end_at_exit"]:
            raise
        status = _status(exc.code)
        atexit._run_exitfuncs()  # what the teardown would run first, then nothing else of it
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a reader that went away (``| head``), a closed stream
                pass
        os._exit(status)


def own_process() -> bool:
    """Whether the command line runs in a process that ends with it (:func:`run_as_process`)."""
    return _state["own_process"]


def end_without_teardown() -> None:
    """Leave the process at the command's exit without Python's teardown (:func:`run_as_process` only)."""
    _state["end_at_exit"] = True


def _status(code: object) -> int:
    """The exit status ``SystemExit(code)`` gives a process, as Python's own exit computes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1
