"""A program run as several processes under ``jax.distributed``, as the runner sees it.

A pod program runs a process per host; on one machine, several CPU processes with a
coordinator on the loopback address stand in for them. Each ``offload-fixer run`` checks its
own process's compilations; when the programs end, what each found goes to process 0 through
the key-value store of the coordinator the program started (:func:`gather`), so that one
process reports for all.

Part of :mod:`offload_fixer.jax_compat`: the coordinator's client is
``jax._src.distributed.global_state`` (``client``, ``process_id``, ``num_processes``), private
and the same in JAX 0.4.35 - 0.12.0.1, as are the client's ``key_value_set`` and
``blocking_key_value_get``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

KEY = "offload-fixer/run"
"""Where each process leaves what it found in the coordinator's store: ``KEY/<process>``."""


def place() -> tuple[int, int] | None:
    """``(this process, the number of processes)`` of a program that started
    ``jax.distributed``; ``None`` where it did not (or shut it down)."""
    import sys

    distributed = sys.modules.get("jax._src.distributed")
    state = getattr(distributed, "global_state", None)
    if state is None or getattr(state, "client", None) is None:
        return None
    return int(state.process_id), int(state.num_processes)


def is_first_process() -> bool:
    """Not a process after the first of a ``jax.distributed`` program: the one that writes."""
    where = place()
    return where is None or where[0] == 0


def gather(payload: str, timeout_s: float) -> list[str | None] | None:
    """Every process's ``payload``, in process order, on process 0 (``None`` for a process
    that left none within ``timeout_s`` of this one asking); ``None`` on the others, which
    only leave theirs. Call it once every process's program has ended."""
    from jax._src import distributed

    state = distributed.global_state
    client = state.client
    if client is None:
        raise RuntimeError("jax.distributed is not running")
    client.key_value_set(f"{KEY}/{state.process_id}", payload)
    if state.process_id != 0:
        return None
    gathered: list[str | None] = []
    for process in range(state.num_processes):
        try:
            gathered.append(client.blocking_key_value_get(f"{KEY}/{process}", int(timeout_s * 1000)))
        except Exception:  # noqa: BLE001 - the coordinator's deadline error: that process left nothing
            gathered.append(None)
    return gathered


@contextmanager
def shutdown_held() -> Iterator[None]:
    """While the program runs, its ``jax.distributed.shutdown()`` is held back: the
    coordinator must outlive the program for :func:`gather`. The shutdown it asked for
    happens when the block ends."""
    import jax.distributed

    real = jax.distributed.shutdown
    asked: list[bool] = []
    jax.distributed.shutdown = lambda: asked.append(True)
    try:
        yield
    finally:
        jax.distributed.shutdown = real
        if asked:
            real()
