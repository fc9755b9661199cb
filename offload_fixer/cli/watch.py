"""``check --watch``: check again whenever a checked file or a configuration changes, as
``ruff check --watch`` does.

Each check is the command itself without ``--watch``, in a child process: the same report
and summary a user knows, and nothing one check leaves in memory reaches the next. Files are
polled (twice a second, their size and modification time): no extra dependency, and it works
on every filesystem. Ctrl-C ends it (130, as any interrupted command)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

import click

POLL_SECONDS = 0.5


def snapshot(paths: Sequence[str], walk: Callable[[], Sequence[str]]) -> dict[str, tuple[int, int]]:
    """Size and modification time of every file ``check`` would read, and of the
    ``pyproject.toml`` files above them (a changed setting is a change too)."""
    state: dict[str, tuple[int, int]] = {}
    configs: set[str] = set()
    for path in walk():
        directory = os.path.dirname(os.path.abspath(path))
        configs.update(os.path.join(d, "pyproject.toml") for d in _parents(directory))
        _stat_into(state, path)
    for config in configs:
        _stat_into(state, config)
    return state


def _parents(directory: str) -> list[str]:
    found = [directory]
    while os.path.dirname(found[-1]) != found[-1]:
        found.append(os.path.dirname(found[-1]))
    return found


def _stat_into(state: dict[str, tuple[int, int]], path: str) -> None:
    try:
        info = os.stat(path)
    except OSError:
        return
    state[path] = (info.st_size, info.st_mtime_ns)


def watch(argv: Sequence[str], paths: Sequence[str], walk: Callable[[], Sequence[str]]) -> None:
    """Run ``offload-fixer check ARGV`` now and after every change; never returns."""
    command = [sys.executable, "-m", "offload_fixer", "check", *argv]
    click.echo("Starting offload-fixer in watch mode...", err=True)
    while True:
        before = snapshot(paths, walk)
        subprocess.run(command, check=False)
        click.echo("Watching for file changes.", err=True)
        while snapshot(paths, walk) == before:
            time.sleep(POLL_SECONDS)
        click.echo("File change detected...", err=True)
