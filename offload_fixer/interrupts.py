"""Signals that must wait: a write into a file in place is not interrupted halfway.

The CLI turns SIGINT and SIGTERM into an exception raised wherever the program is, so that
cleanup runs. Inside :func:`uninterrupted` the handler only records the signal; it is raised
when the block ends, once the file holds all of its new bytes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_state = threading.local()


@contextmanager
def uninterrupted() -> Iterator[None]:
    depth = getattr(_state, "depth", 0)
    _state.depth = depth + 1
    try:
        yield
    finally:
        _state.depth = depth
        if depth == 0 and getattr(_state, "pending", False):
            _state.pending = False
            raise KeyboardInterrupt


def defer_if_uninterrupted() -> bool:
    """For a signal handler: True (the signal is recorded, raise nothing now) inside
    :func:`uninterrupted`."""
    if getattr(_state, "depth", 0):
        _state.pending = True
        return True
    return False
