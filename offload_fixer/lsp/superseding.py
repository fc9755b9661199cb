"""Planning quick fixes gives way to the next change.

The server plans a version's quick fixes once the document has been still a moment
(``server.PLAN_AFTER_S``). The planner reads the whole text and dry-runs each codemod: up to
seconds for a module with many findings. It runs in the analysis worker, which analyses one
thing at a time, so a change that came meanwhile used to wait for all of it: 4.8 s per typed
line on a 2,000-line module. Cancelling the server's task does not stop the worker.

Here every change the server schedules counts in a number the server and its worker share
(:class:`Changes`). A planning started for one count (:class:`Ticket`) stops when the count
moves on: between root causes, where the engine asks the ticket (:func:`check`), and, in a
worker process on a POSIX system, at once, by a signal the server sends while the worker says
it is planning (:func:`cut_short`, :func:`on_signal`). What stops it is :class:`Superseded`,
which the engine catches: the version keeps its findings unplanned, and a code action plans
them when asked. Analyses are never cut short, only planning.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

SIGNAL: Any = getattr(signal, "SIGUSR1", None)
"""What the server sends the worker to cut a planning short; None where there is none (Windows)."""


class _Plain:
    """A value of this process alone, read and written as a ``RawValue``'s."""

    value = 0


class Superseded(Exception):
    """A change came after the planning began: its result is no longer wanted."""


class Changes:
    """The count of changes the server scheduled, and whether (and in which process) a planning
    runs now: memory shared with the worker process made in ``context`` (a multiprocessing
    context), so that it reads them without asking the server; plain values where the worker
    is a thread of the server (``context`` None)."""

    def __init__(self, context: Any = None) -> None:
        def value(code: str) -> Any:
            return context.RawValue(code, 0) if context is not None else _Plain()

        self.count = value("Q")
        self.planning = value("b")
        self.planner_pid = value("i")
        """The process that plans, where it is not the server's own (0: in the server's)."""

    def advance(self) -> None:
        """A change was scheduled: any planning begun before it is superseded, and cut short
        now where it runs in the worker process."""
        self.count.value += 1
        pid = self.planner_pid.value
        if self.planning.value and SIGNAL is not None and pid and pid != os.getpid():
            try:
                os.kill(pid, SIGNAL)
            except OSError:  # the worker is gone: its replacement plans nothing yet
                pass

    def ticket(self) -> Ticket:
        return Ticket(self.count.value)


@dataclass(frozen=True)
class Ticket:
    """A planning begun at change number ``seen``; pickled into the worker with its call."""

    seen: int

    def superseded(self) -> bool:
        return _changes is not None and _changes.count.value != self.seen


_changes: Changes | None = None
"""This process's view of the server's count: the worker's is set when it starts (:func:`share`)."""
_running: Ticket | None = None
"""The ticket of the planning running in this process's main thread, if any."""


def share(changes: Changes | None, in_worker_process: bool) -> None:
    """Read ``changes`` here (None: no count, nothing is superseded); in the worker process,
    also take the server's signal."""
    global _changes
    _changes = changes
    if changes is not None and in_worker_process and SIGNAL is not None:
        changes.planner_pid.value = os.getpid()
        signal.signal(SIGNAL, on_signal)


def check(ticket: Ticket | None) -> None:
    """Raise :class:`Superseded` where a change came after ``ticket``."""
    if ticket is not None and ticket.superseded():
        raise Superseded


@contextmanager
def cut_short(ticket: Ticket | None) -> Iterator[None]:
    """A planning for ``ticket``: while it runs, the server's signal raises :class:`Superseded`
    in it once a change came after the ticket."""
    global _running
    if ticket is None or _changes is None:
        yield
        return
    _running = ticket
    _changes.planning.value = 1
    try:
        check(ticket)
        yield
    finally:
        _changes.planning.value = 0
        _running = None


def on_signal(signum: int, frame: Any) -> None:
    """The server's signal: raised in the planning it supersedes, nowhere else. The ticket is let
    go first, so that the exception is raised once, even from the planning's own ``finally``."""
    global _running
    ticket = _running
    if ticket is not None and ticket.superseded():
        _running = None
        if _changes is not None:
            _changes.planning.value = 0
        raise Superseded
