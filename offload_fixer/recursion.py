"""Deeply nested source: valid Python that recursive tree walks cannot take at the default limit.

A sum of 350 terms, calls nested 150 deep or an attribute chain of 400 are one tree each
350-400 levels deep, and libcst's visitors use several Python frames per level: Python's
default limit of 1,000 frames is reached. Raising the limit in the thread that hit it could
overflow its C stack, so the work is done again in a thread of its own with a large stack
and a higher limit. Only the rare file that needs it pays for the second try.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

DEEP_RECURSION_LIMIT = 50_000
DEEP_STACK_BYTES = 512 * 1024 * 1024
"""Reserved, not committed: the pages a walk never reaches cost no memory."""

_T = TypeVar("_T")
_lock = threading.Lock()
_deep_threads = 0
_saved_limit = 0


def call_allowing_deep_recursion(function: Callable[..., _T], *args: object) -> _T:
    """``function(*args)``; after a ``RecursionError``, once more in a thread with a
    :data:`DEEP_STACK_BYTES` stack and a :data:`DEEP_RECURSION_LIMIT` frame limit. A
    ``RecursionError`` from that try is raised to the caller."""
    try:
        return function(*args)
    except RecursionError:
        pass
    outcome: list = []

    def deep() -> None:
        try:
            outcome.append((True, function(*args)))
        except BaseException as exc:  # noqa: BLE001 - handed back to the calling thread
            outcome.append((False, exc))

    _raise_limit()
    try:
        thread = _start_with_stack(deep)
        thread.join()
    finally:
        _restore_limit()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _start_with_stack(target: Callable[[], None]) -> threading.Thread:
    with _lock:
        previous = threading.stack_size()
        try:
            threading.stack_size(DEEP_STACK_BYTES)
        except (ValueError, RuntimeError):  # a platform without settable stacks: the default
            pass
        try:
            thread = threading.Thread(target=target, name="offload-fixer-deep-recursion", daemon=True)
            thread.start()
        finally:
            threading.stack_size(previous)
    return thread


def _raise_limit() -> None:
    global _deep_threads, _saved_limit
    with _lock:
        if _deep_threads == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, DEEP_RECURSION_LIMIT))
        _deep_threads += 1


def _restore_limit() -> None:
    global _deep_threads
    with _lock:
        _deep_threads -= 1
        if _deep_threads == 0:
            sys.setrecursionlimit(_saved_limit)
