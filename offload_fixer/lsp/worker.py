"""The analysis worker: one process of its own, started before the protocol's imports.

A fresh server spends about 0.55 s of CPU importing pygls and lsprotocol (whose attrs classes
are compiled at import) and about 0.35 s importing libcst and the static check and running
its first check. In one process the GIL makes these add up; here the worker imports and warms
the analysis on the second core while the server imports the protocol and answers
``initialize``, so the first ``didOpen`` finds the check ready (``benchmarks/lsp_latency.py
--startup``). The engine's functions take and return plain data (:mod:`.engine`), so they run
in the worker unchanged, one at a time, with their caches kept there.

Where a process cannot be started (no working semaphores, say), the analysis runs in a thread
of the server, as before.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor
from typing import Any

from offload_fixer.lsp.superseding import Changes, share

log = logging.getLogger(__name__)

WARM_UP = """import jax
from jax.sharding import SingleDeviceSharding

host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


def scale(x):
    return x * 2


scale_on_host = jax.jit(scale, in_shardings=host)
"""
"""Checked once by the worker before any document comes: a finding, so the whole path runs."""


class AnalysisWorker(Executor):
    """One worker process; a new one replaces it when it dies (the analysis it ran fails with
    ``BrokenProcessPool``, which the server logs like any failed analysis). ``changes``: the
    count of changes it shares with the server, which supersedes a planning of quick fixes
    (:mod:`.superseding`)."""

    def __init__(self) -> None:
        # fork where it is safe (Linux, while this process runs no other thread: before the
        # server starts any, and where JAX, whose runtime threads Python does not count, is not
        # imported): the child starts with what is imported already, in milliseconds. Elsewhere
        # a fresh interpreter.
        safe = sys.platform == "linux" and threading.active_count() == 1 and "jax" not in sys.modules
        self._pool, self.changes = _start("fork" if safe else "spawn")

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        try:
            return self._pool.submit(fn, *args, **kwargs)
        except BrokenProcessPool:
            log.warning("the analysis worker stopped; starting another")
            self._pool, self.changes = _start("spawn")  # the server runs threads by now: never fork it again
            return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)


def _start(method: str) -> tuple[Executor, Changes]:
    context = multiprocessing.get_context(method)
    try:
        changes = Changes(context)
        pool: Executor = ProcessPoolExecutor(
            max_workers=1,
            mp_context=context,
            initializer=_initialize,
            initargs=(os.getpid(), changes),
        )
        pool.submit(warm)
    except (OSError, ImportError, NotImplementedError) as exc:
        log.warning("analysing in the server's own process (no worker process: %s)", exc)
        changes = Changes()
        share(changes, in_worker_process=False)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="offload-fixer-analysis")
        pool.submit(warm)
    return pool, changes


def _initialize(parent: int, changes: Changes) -> None:
    """In the worker: stdout carries the protocol and stdin the client's messages, so neither
    is the worker's; Ctrl-C is the server's to handle; the worker ends with the server; a
    change in the server supersedes the planning of quick fixes here."""
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    share(changes, in_worker_process=True)
    threading.Thread(target=_end_with, args=(parent,), daemon=True, name="offload-fixer-parent").start()


def _end_with(parent: int) -> None:
    """A forked worker shares the server's end of its task queue, so it would never see the
    queue close when the server exits: it watches the server instead."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def warm() -> None:
    """Import and run the static check once, then keep the collector off the long-lived heap."""
    from offload_fixer.static import check_source

    check_source(WARM_UP, "warm_up.py")
    _freeze_heap()


def _freeze_heap() -> None:
    """Move what is alive now (modules, libcst's grammar) out of the collector's sight and
    collect less often. An analysis allocates hundreds of thousands of short-lived nodes, and
    full collections that re-scan the long-lived heap cost about 40% of a check of a 2,000-line
    file otherwise."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
