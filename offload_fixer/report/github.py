"""The ``github`` format: GitHub Actions workflow commands, one annotation a line."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from offload_fixer.findings import location as primary_span
from offload_fixer.model import Diagnostic, Report, Span
from offload_fixer.report.places import (
    FileError,
    cell_words,
    display_path,
    in_file,
    named_places,
    sort_key,
    unpredicted,
)

if TYPE_CHECKING:
    from offload_fixer.suppression import UnusedSuppression

_GITHUB_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    """GitHub workflow-command escaping for the message part."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """GitHub workflow-command escaping for ``key=value`` properties (adds ``:`` and ``,``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _github_command(level: str, span: Span, title: str, message: str, root) -> str:
    """A workflow command; a notebook cell's position is given as its place in the ``.ipynb``
    text (what the pull request's diff shows), and the cell is named in the message."""
    message = cell_words(span) + message
    span = in_file(span)
    properties = [("file", display_path(span.path, root)), ("line", str(span.line)), ("col", str(span.col))]
    if span.end_line is not None:
        properties.append(("endLine", str(span.end_line)))
    if span.end_col is not None:
        properties.append(("endColumn", str(span.end_col)))
    properties.append(("title", title))
    joined = ",".join(f"{key}={escape_property(value)}" for key, value in properties)
    return f"::{level} {joined}::{escape_data(message)}"


def format_github(
    diagnostics: Sequence[Diagnostic],
    file_errors: Sequence[FileError] = (),
    unused_suppressions: Sequence[UnusedSuppression] = (),
    *,
    root: str | os.PathLike[str] | None = None,
    compilations: Sequence[Report] = (),
) -> str:
    """GitHub Actions annotations, one workflow command per line."""
    out = []
    for difference in unpredicted(compilations):
        out.append(f"::error title=offload-fixer --confirm::{escape_data(difference)}")
    for error in file_errors:
        out.append(_github_command("error", error.span, "offload-fixer", error.message, root))
    for d in sorted(diagnostics, key=sort_key):
        span = primary_span(d)
        lines = [f"{d.code} {d.message}", *(f"{label}: {words}" for label, words in named_places(d))]
        lines += [f"fix ({fix.safety}): {fix.title}" for fix in d.fixes]
        level = _GITHUB_LEVEL.get(d.severity, "warning")
        if span is None:
            out.append(f"::{level} title={escape_property(d.code)}::{escape_data(chr(10).join(lines))}")
        else:
            out.append(_github_command(level, span, d.code, "\n".join(lines), root))
    for unused in unused_suppressions:
        out.append(_github_command("warning", unused.span, "offload-fixer", unused.message, root))
    return "\n".join(out) + ("\n" if out else "")
