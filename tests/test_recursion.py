"""Deep trees get a second try with a large stack and a higher limit, once, in their own thread."""

from __future__ import annotations

import sys
import threading

import pytest

from offload_fixer.recursion import DEEP_RECURSION_LIMIT, call_allowing_deep_recursion


def depth(n: int) -> int:
    return 0 if n == 0 else 1 + depth(n - 1)


def test_a_walk_too_deep_for_the_default_limit_succeeds_on_the_second_try() -> None:
    limit = sys.getrecursionlimit()
    threads: list[str] = []

    def walk(n: int) -> int:
        threads.append(threading.current_thread().name)
        return depth(n)

    assert call_allowing_deep_recursion(walk, 5 * limit) == 5 * limit
    assert threads[0] == threading.current_thread().name and threads[1] != threads[0]
    assert sys.getrecursionlimit() == limit  # restored


def test_what_is_too_deep_even_then_raises_recursion_error() -> None:
    with pytest.raises(RecursionError):
        call_allowing_deep_recursion(depth, 2 * DEEP_RECURSION_LIMIT)


def test_other_errors_pass_through_from_either_try() -> None:
    def fails_when_deep(n: int) -> int:
        depth(n)
        raise KeyError("deep")

    with pytest.raises(KeyError):
        call_allowing_deep_recursion(fails_when_deep, 3 * sys.getrecursionlimit())
