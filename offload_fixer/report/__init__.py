"""Output formats the CLI prints and CI reads: ``text`` (and ``concise``), ``json``, ``sarif``,
``github``, a module each, and :func:`render`, which picks one.

Every formatter takes the same inputs -- diagnostics, files that could not be checked, unused
suppressions -- so ``--format`` only changes the spelling. Paths are shown relative to
``root`` (the working directory by default), because GitHub de-duplicates alerts by rule id,
path and a line fingerprint: those must not change between machines. What every format shares
(notebook cells, relative paths, the order, the words for an origin and an output) is in
:mod:`offload_fixer.report.places`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from offload_fixer.findings import FixMark
from offload_fixer.findings import location as primary_span
from offload_fixer.model import FORMATS, Diagnostic, FunctionRef, MeasuredFix, Report
from offload_fixer.report.github import escape_data, escape_property, format_github
from offload_fixer.report.jsondoc import format_json
from offload_fixer.report.places import FileError, display_path, in_cells, unpredicted
from offload_fixer.report.text import Tally, format_statistics, format_text, output_trees, summary_lines

if TYPE_CHECKING:
    from offload_fixer.report.sarif import SourceChange, format_sarif, text_replacements
    from offload_fixer.suppression import UnusedSuppression

_SARIF = frozenset({"SourceChange", "format_sarif", "text_replacements"})
"""Names of :mod:`.sarif`, loaded when first asked for: a run that prints no SARIF (most do)
imports neither it nor what it needs (``difflib``, ``hashlib``)."""


def __getattr__(name: str) -> object:
    if name in _SARIF:
        from offload_fixer.report import sarif

        return getattr(sarif, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FileError",
    "SourceChange",
    "Tally",
    "display_path",
    "escape_data",
    "escape_property",
    "format_github",
    "format_json",
    "format_sarif",
    "format_statistics",
    "format_text",
    "output_trees",
    "primary_span",
    "render",
    "summary_lines",
    "text_replacements",
    "unpredicted",
]


def render(
    fmt: str,
    diagnostics: Iterable[Diagnostic],
    file_errors: Iterable[FileError] = (),
    unused_suppressions: Iterable[UnusedSuppression] = (),
    *,
    root: str | os.PathLike[str] | None = None,
    color: bool = False,
    target: str | None = None,
    jax_version: str | None = None,
    sources: Mapping[str, str] | None = None,
    fixes: Mapping[Diagnostic, Sequence[SourceChange]] | None = None,
    marks: Mapping[Diagnostic, FixMark] | None = None,
    verbose: bool = False,
    tally: Tally | None = None,
    compilations: Sequence[Report] = (),
    measured: Sequence[MeasuredFix] = (),
    trees: Mapping[FunctionRef, frozenset[str]] | None = None,
) -> str:
    """The whole output for ``--format fmt``, ending with a newline unless it is empty.
    ``marks``, ``verbose`` and ``tally`` are for the text formats. ``compilations``: the
    reports ``--confirm`` had the compiler judge; the machine formats record every verdict and
    every one the analysis did not predict (the text formats say those on stderr). ``trees``:
    every flat output of each function, for the text formats (:func:`.text.output_trees`). ``measured``:
    the fixes ``run`` compiled, with their memory figures (JSON's and SARIF's ``fixes``; the
    text formats say them on stderr as each file is fixed).

    Positions in notebooks, which count the lines of their code cells' program, are shown
    per cell (``nb.ipynb:cell 3:12:5``; in SARIF and GitHub annotations, where the ``.ipynb``
    file's own text is shown, at that cell line's place in the file).
    """
    given = list(diagnostics)
    diagnostics, file_errors, unused = in_cells(given, list(file_errors), list(unused_suppressions))
    if marks and diagnostics is not given:  # the marks follow their diagnostics into cell coordinates
        marks = {moved: marks[d] for d, moved in zip(given, diagnostics) if d in marks}
    if fmt in ("text", "concise"):
        return format_text(
            diagnostics,
            file_errors,
            unused,
            root=root,
            color=color,
            marks=marks,
            verbose=verbose,
            concise=fmt == "concise",
            tally=tally,
            trees=trees,
        )
    if fmt == "json":
        document = format_json(
            diagnostics,
            file_errors,
            unused,
            target=target,
            jax_version=jax_version,
            compilations=compilations,
            measured=measured,
        )
        return json.dumps(document, indent=2) + "\n"
    if fmt == "sarif":
        from offload_fixer.report.sarif import format_sarif

        document = format_sarif(
            diagnostics,
            file_errors,
            unused,
            root=root,
            target=target,
            jax_version=jax_version,
            sources=sources,
            fixes=fixes,
            compilations=compilations,
            measured=measured,
        )
        return json.dumps(document, indent=2) + "\n"
    if fmt == "github":
        return format_github(diagnostics, file_errors, unused, root=root, compilations=compilations)
    raise ValueError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")
