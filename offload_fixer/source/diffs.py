"""Unified diffs of source text, as ``--diff``, ``--show-fixes`` and ``%offload_fix`` show
them: for a file, for a notebook's cell, for an IPython input."""

from __future__ import annotations

import difflib
import os

from offload_fixer.source.decoding import split_lines


def unified_diff(path: str, old: str, new: str) -> str:
    """A ``git apply``-able diff, with the "No newline at end of file" marker where needed."""
    shown = os.path.relpath(path) if os.path.isabs(path) else path
    if shown.startswith(".."):
        shown = path.lstrip("/")
    out = []
    for line in difflib.unified_diff(split_lines(old), split_lines(new), f"a/{shown}", f"b/{shown}"):
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)
