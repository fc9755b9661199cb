"""What the command line shows on a terminal beyond its report: colour, and a progress line.

Colour follows ``--color`` first, then the ``NO_COLOR`` and ``FORCE_COLOR`` conventions
(no-color.org, force-color.org: set and non-empty), then whether the stream is a terminal.
Progress is drawn on stderr only when stderr is a terminal, so pipes, files, CI logs and
pre-commit never see it, and it is erased before the report is printed.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import TextIO

COLOR_CHOICES = ("auto", "always", "never")


def color_enabled(choice: str, stream: TextIO) -> bool:
    """Whether to colour what is written to ``stream`` (``choice`` from ``--color``)."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return is_terminal(stream)


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class Progress:
    """One line on stderr, rewritten in place and erased when done; silent off a terminal.

    ``delay`` keeps short jobs from flashing a line; updates are drawn at most ten times a
    second.
    """

    def __init__(self, enabled: bool, stream: TextIO | None = None, delay: float = 0.0) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled and is_terminal(self.stream)
        self.started = time.monotonic()
        self.delay = delay
        self._drawn = False
        self._last = 0.0

    def show(self, text: str, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.started < self.delay or (not force and self._drawn and now - self._last < 0.1):
            return
        width = shutil.get_terminal_size((80, 24)).columns - 1
        self.stream.write("\r\x1b[2K" + text[:width])
        self.stream.flush()
        self._drawn = True
        self._last = now

    def count(self, label: str, done: int, total: int) -> None:
        """``label  done/total  [#####     ]``."""
        bar = 24
        filled = bar * done // total if total else bar
        self.show(f"{label}  {done}/{total}  [{'#' * filled}{' ' * (bar - filled)}]", force=done == total)

    def clear(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.clear()
