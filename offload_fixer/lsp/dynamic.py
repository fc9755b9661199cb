"""The findings of the last ``offload-fixer run``, shown in the documents they name.

``run`` leaves its report in ``.offload-fixer/last-run.json`` (:mod:`offload_fixer.last_run`).
For an open document the server reads the nearest one (again whenever it changes on disk),
keeps the diagnostics whose primary span is in that document, and places them:

* the document is the text the run analysed (same sha256): as reported;
* it changed: each line a finding names is looked for again (the report keeps it with its
  neighbours): where it still stands with the same neighbours, or else where it is the one
  line of the document with that text, the finding moves with it; a finding whose line was
  edited or removed is dropped, since it may no longer hold.

Nothing is executed: this only reads the report and the editor's text.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any

from offload_fixer import last_run
from offload_fixer.model import Diagnostic, MeasuredFix, Origin, Report, Span


class LastRunFeed:
    """Reads last-run reports, cached by their modification stamp."""

    def __init__(self) -> None:
        self._reports: dict[Path, tuple[Any, Any]] = {}

    def report_for(self, document: str) -> tuple[Path, Any] | None:
        """The nearest report above ``document`` and its contents (None when there is none,
        or it cannot be read: the editor then shows only the static check)."""
        from offload_fixer.report_file import read_report_file

        path = last_run.find_for(document)
        if path is None:
            return None
        try:
            status = path.stat()
            stamp = (status.st_mtime_ns, status.st_size)
        except OSError:
            return None
        cached = self._reports.get(path)
        if cached is None or cached[0] != stamp:
            try:
                report = read_report_file(str(path))
            except (OSError, ValueError, KeyError, TypeError):
                report = None
            cached = self._reports[path] = (stamp, report)
        return None if cached[1] is None else (path, cached[1])

    def fixes(self, document: str, encoded: bytes) -> dict[str, MeasuredFix]:
        """The fixes the last run compiled for this document (its bytes: ``encoded``; ``run --diff`` with a
        compiler installed), by title, while it is the very text the run analysed: the figures
        are of that text's fix, so any edit drops them. Nothing is compiled here."""
        found = self.report_for(document)
        if found is None:
            return {}
        _, run = found
        analysed_path = next((p for p in run.sources if _same_file(p, document)), None)
        digest = hashlib.sha256(encoded).hexdigest()
        if analysed_path is None or run.sources[analysed_path] != digest:
            return {}
        return {fix.title: fix for fix in run.fixes if _same_file(fix.path, document) and not fix.written}

    def diagnostics(self, document: str, text: str, encoded: bytes) -> tuple[Diagnostic, ...]:
        """The last run's diagnostics for this document's current text (``encoded``: its bytes)."""
        return tuple(d for report in self.reports(document, text, encoded) for d in report.diagnostics)

    def reports(self, document: str, text: str, encoded: bytes) -> tuple[Report, ...]:
        """The last run's reports with a finding in this document, holding only those findings,
        placed in its current text: with their output trees, which host-output fixes mirror."""
        found = self.report_for(document)
        if found is None:
            return ()
        _, run = found
        analysed_path = next((p for p in run.sources if _same_file(p, document)), None)
        digest = hashlib.sha256(encoded).hexdigest()
        unchanged = analysed_path is not None and run.sources[analysed_path] == digest
        moved = (
            {}
            if unchanged
            else line_moves(run.lines.get(analysed_path, {}) if analysed_path else {}, text.splitlines())
        )
        placed_reports = []
        for report in run.reports:
            placed = []
            for d in report.diagnostics:
                if not _primary_in(d, document):
                    continue
                where = d if unchanged else _moved(d, document, moved)
                if where is not None:
                    placed.append(dataclasses.replace(where, source_sha256=digest))
            if placed:
                placed_reports.append(dataclasses.replace(report, diagnostics=tuple(placed)))
        return tuple(placed_reports)


def line_moves(recorded: dict[int, tuple[str, str, str]], lines: list[str]) -> dict[int, int]:
    """Old line number -> new line number, for the recorded lines still found in ``lines``."""
    where: dict[str, list[int]] = {}
    for number, line in enumerate(lines, 1):
        where.setdefault(line, []).append(number)
    moves = {}
    for old, (before, line, after) in recorded.items():
        candidates = where.get(line, [])
        with_context = [n for n in candidates if _at(lines, n - 1) == before and _at(lines, n + 1) == after]
        if with_context:
            moves[old] = min(with_context, key=lambda n: abs(n - old))
        elif len(candidates) == 1:
            moves[old] = candidates[0]
    return moves


def _at(lines: list[str], number: int) -> str:
    return lines[number - 1] if 1 <= number <= len(lines) else ""


def _moved(d: Diagnostic, document: str, moves: dict[int, int]) -> Diagnostic | None:
    """The diagnostic with its spans in this document moved; None when its own line is gone."""
    from offload_fixer.report import primary_span

    primary = primary_span(d)
    if primary is None or primary.line not in moves:
        return None

    def span(s: Span | None) -> Span | None:
        if s is None or not _same_file(s.path, document):
            return s
        if s.line not in moves:
            return None
        shift = moves[s.line] - s.line
        end = None if s.end_line is None else s.end_line + shift
        return dataclasses.replace(s, line=s.line + shift, end_line=end)

    origin: Origin | None = d.origin
    if origin is not None and origin.span is not None:
        origin = dataclasses.replace(origin, span=span(origin.span))
    trace = tuple(dataclasses.replace(step, span=span(step.span)) for step in d.trace)
    function = d.function
    if function is not None and function.line is not None and _same_file(function.path, document):
        # the ``def`` line is recorded too; if it changed, it moved as the finding's own line did
        line = moves.get(function.line, function.line + moves[primary.line] - primary.line)
        function = dataclasses.replace(function, line=line)
    return dataclasses.replace(
        d, span=span(d.span), return_span=span(d.return_span), origin=origin, trace=trace, function=function
    )


def _primary_in(d: Diagnostic, document: str) -> bool:
    from offload_fixer.report import primary_span

    span = primary_span(d)
    return span is not None and _same_file(span.path, document)


def _same_file(a: str | None, b: str | None) -> bool:
    if not a or not b:
        return False
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))
