"""The text of a file the analysis points at: on disk, else in Python's line cache.

An IPython kernel compiles each cell under a file name of its own that exists only in
``linecache``, where IPython keeps the cell's text for tracebacks: ipykernel names it
``/tmp/ipykernel_<pid>/<hash>.py``, IPython's terminal ``<ipython-input-N-hash>``. Reading
through here lets a jitted function defined in a cell be located like one in a file.
"""

from __future__ import annotations

import linecache

INTERACTIVE_PREFIX = "<ipython-input-"


def is_interactive(path: str) -> bool:
    """A name IPython gives a cell (the ``<...>`` names of ``exec``'d strings have no text)."""
    return path.startswith(INTERACTIVE_PREFIX)


def source_bytes(path: str) -> bytes | None:
    """The file's bytes, else the cached text of an IPython cell; None when neither exists."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        lines = linecache.getlines(path)
        return "".join(lines).encode("utf-8") if lines else None
