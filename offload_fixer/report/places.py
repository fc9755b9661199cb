"""Where a finding is shown, for every format: notebook cells, paths relative to the root, the
order of findings, the words for an origin and an output, the defaults of a report's target and
JAX version, and ``--confirm``'s verdicts.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offload_fixer.findings import location as primary_span
from offload_fixer.model import WHOLE_RESULT, Diagnostic, Report, Span

if TYPE_CHECKING:
    from offload_fixer.suppression import UnusedSuppression

TOOL_NAME = "offload-fixer"


@dataclass(frozen=True)
class FileError:
    """A file the check could not read or parse; it counts towards exit status 2."""

    path: str
    line: int
    col: int
    message: str
    cell: int | None = None
    """The notebook cell ``line`` counts in, as :attr:`Span.cell`."""

    @property
    def span(self) -> Span:
        return Span(self.path, self.line, self.col, cell=self.cell)


def in_cells(
    diagnostics: list[Diagnostic], file_errors: list[FileError], unused: list[UnusedSuppression]
) -> tuple[list[Diagnostic], list[FileError], list[UnusedSuppression]]:
    """Everything that points into a notebook, in cell coordinates."""
    paths: list[str | None] = [*(e.path for e in file_errors), *(u.path for u in unused)]
    paths += [s.path for d in diagnostics for s in _spans(d)] + [d.function.path for d in diagnostics if d.function]
    if not any(str(p).endswith(".ipynb") for p in paths if p):  # is_notebook, without loading the reader
        return diagnostics, file_errors, unused
    from offload_fixer.notebook.positions import cell_span, diagnostic_in_cells

    def moved(item: Any) -> Any:
        span = cell_span(item.span)
        return (
            item
            if span is None or span is item.span
            else dataclasses.replace(item, line=span.line, col=span.col, cell=span.cell)
        )

    return [diagnostic_in_cells(d) for d in diagnostics], [moved(e) for e in file_errors], [moved(u) for u in unused]


def _spans(diagnostic: Diagnostic) -> list[Span]:
    spans = [diagnostic.span, diagnostic.return_span, diagnostic.origin.span if diagnostic.origin else None]
    return [s for s in spans + [step.span for step in diagnostic.trace] if s is not None]


def in_file(span: Span) -> Span:
    """A span where the file's own text has it: a notebook cell's line in the ``.ipynb``."""
    if span.cell is None:
        return span
    from offload_fixer.notebook.positions import file_span

    return file_span(span)


def cell_line(span: Span) -> str:
    from offload_fixer.notebook.positions import cell_line_text

    return cell_line_text(span)


def cell_words(span: Span | None) -> str:
    """``In cell 3, line 12: `` for a position in a notebook (whose file position is the JSON's)."""
    return f"In cell {span.cell}, line {span.line}, column {span.col}: " if span is not None and span.cell else ""


def display_path(path: str, root: str | os.PathLike[str] | None = None) -> str:
    """``path`` relative to ``root`` with ``/`` separators, or absolute when outside it."""
    relative = relative_path(path, root)
    return relative if relative is not None else os.path.abspath(path)


def relative_path(path: str, root: str | os.PathLike[str] | None) -> str | None:
    base = os.path.abspath(root if root is not None else os.getcwd())
    try:
        return Path(os.path.abspath(path)).relative_to(base).as_posix()
    except ValueError:
        return None


def sort_key(diagnostic: Diagnostic) -> tuple:
    span = primary_span(diagnostic)
    where = (span.path, span.cell or 0, span.line, span.col) if span else ("", 0, 0, 0)
    return (*where, diagnostic.code, diagnostic.output_path or "")


def output_words(diagnostic: Diagnostic) -> str | None:
    if diagnostic.output_path is None and diagnostic.output_index is None:
        return None
    path = diagnostic.output_path if diagnostic.output_path else WHOLE_RESULT
    flat = f" (flat output {diagnostic.output_index})" if diagnostic.output_index is not None else ""
    return f"{path}{flat}"


def origin_words(diagnostic: Diagnostic) -> str | None:
    origin = diagnostic.origin
    if origin is None:
        return None
    words = f"{origin.kind.replace('_', ' ')} ({origin.memory_kind})"
    return f"{words}: {origin.detail}" if origin.detail else words


def named_places(diagnostic: Diagnostic) -> list[tuple[str, str]]:
    """(``output`` or ``origin``, its words) for each the diagnostic names: what a format that
    puts a finding in one message (GitHub's, SARIF's) adds after it."""
    words = (("output", output_words(diagnostic)), ("origin", origin_words(diagnostic)))
    return [(label, text) for label, text in words if text]


def unpredicted(compilations: Sequence[Report]) -> tuple[str, ...]:
    """Every verdict of the compiler the analysis did not predict, named by its function."""
    return tuple(f"{_compilation_name(c)}: {difference}" for c in compilations for difference in c.unpredicted)


def _compilation_name(report: Report) -> str:
    return report.function.name if report.function else report.module_name or "(module)"


def verdict_record(report: Report) -> dict[str, Any]:
    """One compilation as ``--confirm`` judged it: the compiler's whole verdict (its error
    text as XLA raised it) beside what the analysis predicted."""
    return {
        "function": _compilation_name(report),
        "module": report.module_name,
        "predicted": dataclasses.asdict(report.predicted) if report.predicted else None,
        "xla": dataclasses.asdict(report.xla) if report.xla else None,
        "unpredicted": list(report.unpredicted),
    }


def common_target(diagnostics: Sequence[Diagnostic]) -> str:
    targets = {d.target for d in diagnostics}
    return targets.pop() if len(targets) == 1 else "tpu"


def installed_jax() -> str:
    from offload_fixer.jax_compat import UnsupportedJaxVersion, installed_version

    try:
        return installed_version()
    except UnsupportedJaxVersion:
        return "unknown"
