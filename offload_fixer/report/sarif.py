"""The ``sarif`` format (SARIF 2.1.0, as GitHub code scanning reads it), with each fix as the
smallest replacements that make it.
"""

from __future__ import annotations

import bisect
import difflib
import hashlib
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offload_fixer.findings import location as primary_span
from offload_fixer.model import Diagnostic, MeasuredFix, Report, Span
from offload_fixer.report.places import (
    TOOL_NAME,
    FileError,
    cell_line,
    cell_words,
    common_target,
    in_file,
    installed_jax,
    named_places,
    origin_words,
    output_words,
    relative_path,
    sort_key,
    unpredicted,
    verdict_record,
)
from offload_fixer.version import __version__

if TYPE_CHECKING:
    from offload_fixer.rules import Rule, ToolCode
    from offload_fixer.suppression import UnusedSuppression

INFORMATION_URI = "https://pypi.org/project/offload-fixer/"
SARIF_VERSION = "2.1.0"
SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


@dataclass(frozen=True)
class SourceChange:
    """One file's text before and after a fix, for SARIF's ``fixes[]``."""

    path: str
    before: str
    after: str
    description: str = ""


@dataclass(frozen=True)
class Replacement:
    """Replace ``[start, end)`` of the old text (1-based lines and columns) with ``text``."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int
    text: str


def text_replacements(before: str, after: str) -> list[Replacement]:
    """The smallest line-aligned edits that turn ``before`` into ``after``, trimmed to the
    characters that differ, in positions of ``before``."""
    old_lines = before.splitlines(keepends=True)
    new_lines = after.splitlines(keepends=True)
    starts = [0]
    for line in old_lines:
        starts.append(starts[-1] + len(line))

    def position(offset: int) -> tuple[int, int]:
        index = bisect.bisect_right(starts, offset) - 1
        if index >= len(old_lines) and old_lines and not old_lines[-1].endswith(("\n", "\r")):
            index = len(old_lines) - 1
        return index + 1, offset - starts[index] + 1

    edits = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        old_block = "".join(old_lines[i1:i2])
        new_block = "".join(new_lines[j1:j2])
        prefix = len(os.path.commonprefix([old_block, new_block]))  # noqa: RUF071 - texts, not paths
        room = min(len(old_block), len(new_block)) - prefix
        suffix = len(os.path.commonprefix([old_block[::-1], new_block[::-1]])[:room])  # noqa: RUF071 - texts
        start = starts[i1] + prefix
        end = starts[i2] - suffix
        edits.append(Replacement(*position(start), *position(end), new_block[prefix : len(new_block) - suffix]))
    return edits


def format_sarif(
    diagnostics: Sequence[Diagnostic],
    file_errors: Sequence[FileError] = (),
    unused_suppressions: Sequence[UnusedSuppression] = (),
    *,
    root: str | os.PathLike[str] | None = None,
    target: str | None = None,
    jax_version: str | None = None,
    sources: Mapping[str, str] | None = None,
    fixes: Mapping[Diagnostic, Sequence[SourceChange]] | None = None,
    compilations: Sequence[Report] = (),
    measured: Sequence[MeasuredFix] = (),
) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run; files that could not be checked become notifications,
    and so does each ``--confirm`` verdict the analysis did not predict (every verdict is in
    the run's ``properties.compilations``), and each fix ``run`` compiled, with its memory
    figures in words (their bytes are in the run's ``properties.fixes``)."""
    from offload_fixer.rules import TOOL_CODES, all_rules

    target = target or common_target(diagnostics)
    rules = all_rules()
    index = {code: i for i, code in enumerate([*(rule.code for rule in rules), *(tool.code for tool in TOOL_CODES)])}
    base = Path(root) if root is not None else Path.cwd()
    lines = _LineCache(sources or {})
    seen: dict[tuple[str, str, str], int] = {}
    results = []
    for d in sorted(diagnostics, key=sort_key):
        result: dict[str, Any] = {
            "ruleId": d.code,
            "level": _SARIF_LEVEL.get(d.severity, "warning"),
            "message": {"text": cell_words(primary_span(d)) + _sarif_message(d)},
        }
        if d.code in index:
            result["ruleIndex"] = index[d.code]
        span = primary_span(d)
        if span is not None:
            result["locations"] = [{"physicalLocation": _physical(span, base)}]
            related = _related(d, base)
            if related:
                result["relatedLocations"] = related
            flow = _code_flow(d, base)
            if flow:
                result["codeFlows"] = [flow]
            line_text = cell_line(span) if span.cell is not None else lines.line(span.path, span.line)
            digest = hashlib.sha256(f"{d.code}\0{' '.join(line_text.split())}".encode()).hexdigest()[:16]
            occurrence = seen.get((d.code, span.path, digest), 0) + 1
            seen[(d.code, span.path, digest)] = occurrence
            result["partialFingerprints"] = {"primaryLocationLineHash": f"{digest}:{occurrence}"}
        properties: dict[str, Any] = {"target": d.target, "source": d.source}
        if span is not None and span.cell is not None:
            properties.update(cell=span.cell, cellLine=span.line, cellColumn=span.col)
        if d.output_path is not None:
            properties["outputPath"] = d.output_path
        if d.output_index is not None:
            properties["outputIndex"] = d.output_index
        if d.related_outputs:
            properties["relatedOutputs"] = list(d.related_outputs)
        result["properties"] = properties
        changes = (fixes or {}).get(d)
        if changes:
            result["fixes"] = [_sarif_fix(change, base) for change in changes]
        results.append(result)

    notifications = (
        [_notification("error", cell_words(e.span) + e.message, e.span, base, "file-error") for e in file_errors]
        + [
            _notification("warning", cell_words(u.span) + u.message, u.span, base, "unused-suppression")
            for u in unused_suppressions
        ]
        + [
            {
                "level": "error",
                "message": {"text": difference},
                "descriptor": {"id": "unpredicted-xla-verdict"},
            }
            for difference in unpredicted(compilations)
        ]
        + [_fix_notification(fix, base) for fix in measured]
    )
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": TOOL_NAME,
                "version": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [_sarif_rule(rule, target, jax_version) for rule in rules]
                + [_sarif_tool_code(tool) for tool in TOOL_CODES],
            }
        },
        "invocations": [{"executionSuccessful": not file_errors, "toolExecutionNotifications": notifications}],
        "originalUriBaseIds": {SRCROOT: {"uri": Path(os.path.abspath(base)).as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": results,
        "properties": {"target": target, "jaxVersion": jax_version or installed_jax()},
    }
    if compilations:
        run["properties"]["compilations"] = [verdict_record(compiled) for compiled in compilations]
    if measured:
        run["properties"]["fixes"] = [fix.to_dict() for fix in measured]
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}


def _sarif_rule(rule: Rule, target: str, jax_version: str | None) -> dict[str, Any]:
    from offload_fixer.rules import render_rule

    page = render_rule(rule.code, jax_version)
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": f"{rule.what_it_does} {rule.why_bad}"},
        "help": {"text": page, "markdown": page},
        "defaultConfiguration": {"level": _SARIF_LEVEL[rule.severity(target)]},
        "properties": {"tags": ["jax", "host-offload"]},
    }


def _sarif_tool_code(tool: ToolCode) -> dict[str, Any]:
    """A code of the tool itself (a path that cannot be read), after the rules' (their indexes stay)."""
    page = tool.page()
    return {
        "id": tool.code,
        "name": tool.name,
        "shortDescription": {"text": tool.summary},
        "fullDescription": {"text": tool.what_it_does},
        "help": {"text": page, "markdown": page},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["io"]},
    }


def _sarif_message(d: Diagnostic) -> str:
    parts = [d.message if d.message.endswith(".") else f"{d.message}."]
    parts += [f"{label.capitalize()}: {words}." for label, words in named_places(d)]
    return " ".join(parts)


def _artifact(path: str, base: Path) -> dict[str, Any]:
    """Repository-relative URIs (GitHub matches alerts by them); absolute outside the root."""
    relative = relative_path(path, base)
    if relative is None:
        return {"uri": Path(os.path.abspath(path)).as_uri()}
    return {"uri": urllib.parse.quote(relative), "uriBaseId": SRCROOT}


def _region(span: Span) -> dict[str, int]:
    region = {"startLine": max(span.line, 1), "startColumn": max(span.col, 1)}
    end_line = max(span.end_line or region["startLine"], region["startLine"])
    if span.end_line is not None:
        region["endLine"] = end_line
    if span.end_col is not None:
        floor = region["startColumn"] if end_line == region["startLine"] else 1
        region["endColumn"] = max(span.end_col, floor)
    return region


def _physical(span: Span, base: Path) -> dict[str, Any]:
    return {"artifactLocation": _artifact(span.path, base), "region": _region(in_file(span))}


def _trail(d: Diagnostic) -> list[tuple[Span, str]]:
    """The located points of a diagnostic's story, in order: origin, each step, the return."""
    trail = []
    if d.origin and d.origin.span:
        trail.append((d.origin.span, f"Host memory starts here: {origin_words(d)}"))
    for number, step in enumerate(d.trace, 1):
        if step.span:
            trail.append((step.span, f"Step {number}: {step.op} ({step.role})"))
    if d.return_span:
        trail.append((d.return_span, f"Returned here as output {output_words(d) or ''}".rstrip()))
    return trail


def _related(d: Diagnostic, base: Path) -> list[dict[str, Any]]:
    return [
        {"id": number, "physicalLocation": _physical(span, base), "message": {"text": text}}
        for number, (span, text) in enumerate(_trail(d), 1)
    ]


def _code_flow(d: Diagnostic, base: Path) -> dict[str, Any] | None:
    trail = _trail(d)
    if len(trail) < 2:
        return None
    locations = [
        {"location": {"physicalLocation": _physical(span, base), "message": {"text": text}}} for span, text in trail
    ]
    return {"threadFlows": [{"locations": locations}]}


def _sarif_fix(change: SourceChange, base: Path) -> dict[str, Any]:
    replacements = []
    for edit in text_replacements(change.before, change.after):
        deleted = {
            "startLine": edit.start_line,
            "startColumn": edit.start_col,
            "endLine": edit.end_line,
            "endColumn": edit.end_col,
        }
        replacement: dict[str, Any] = {"deletedRegion": deleted}
        if edit.text:
            replacement["insertedContent"] = {"text": edit.text}
        replacements.append(replacement)
    fix: dict[str, Any] = {
        "artifactChanges": [{"artifactLocation": _artifact(change.path, base), "replacements": replacements}]
    }
    if change.description:
        fix["description"] = {"text": change.description}
    return fix


def _fix_notification(fix: MeasuredFix, base: Path) -> dict[str, Any]:
    """A fix the run checked: what it does and what it costs, where its finding is (a fix it
    could not lower first: a warning that says why, ``fix-unverified``; one it refused: a
    warning that says why, ``fix-refused``)."""
    if fix.refused:
        done, level, kind = "fix refused", "warning", "fix-refused"
    elif fix.unverified:
        done, level, kind = ("fixed" if fix.written else "fix shown"), "warning", "fix-unverified"
    else:
        done, level, kind = ("fixed" if fix.written else "fix compiles"), "note", "fix-measured"
    message = f"{done}: {fix.title}: {fix.summary}"
    if fix.span is None:
        return {"level": level, "message": {"text": message}, "descriptor": {"id": kind}}
    return _notification(level, cell_words(fix.span) + message, fix.span, base, kind)


def _notification(level: str, message: str, span: Span, base: Path, kind: str) -> dict[str, Any]:
    return {
        "level": level,
        "message": {"text": message},
        "locations": [{"physicalLocation": _physical(span, base)}],
        "descriptor": {"id": kind},
    }


class _LineCache:
    """Source lines for fingerprints: from ``sources`` when given, else read once from disk."""

    def __init__(self, sources: Mapping[str, str]):
        self._texts = {os.path.abspath(path): text.splitlines() for path, text in sources.items()}

    def line(self, path: str, number: int) -> str:
        key = os.path.abspath(path)
        if key not in self._texts:
            try:
                self._texts[key] = Path(key).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                self._texts[key] = []
        lines = self._texts[key]
        return lines[number - 1] if 0 < number <= len(lines) else ""
