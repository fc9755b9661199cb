"""Where lines end: as both ``ast`` (universal newlines) and libcst count them."""

from __future__ import annotations

import re

NEWLINE = re.compile(r"\r\n?|\n")
"""A line end: ``\\r\\n``, ``\\r`` or ``\\n``."""
