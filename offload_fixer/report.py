"""Output formats the CLI prints and CI reads: ``text``, ``json``, ``sarif``, ``github``.

Every formatter takes the same inputs -- diagnostics, files that could not be checked, unused
suppressions -- so ``--format`` only changes the spelling. Paths are shown relative to
``root`` (the working directory by default), because GitHub de-duplicates alerts by rule id,
path and a line fingerprint: those must not change between machines.

The four formats are one module of about 800 lines, a section each, because they share the
helpers that place a finding (notebook cells, relative paths, the order, the words for an
origin and an output): a format in its own module would import most of this one.
"""

from __future__ import annotations

import bisect
import dataclasses
import difflib
import hashlib
import json
import os
import textwrap
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offload_fixer.findings import Finding, FixMark, group_findings
from offload_fixer.findings import location as primary_span
from offload_fixer.model import FORMATS, Diagnostic, Report, Span, position_text
from offload_fixer.version import __version__

if TYPE_CHECKING:  # the rule pages and XLA's texts are imported by the formats that show them
    from offload_fixer.rules import Rule
    from offload_fixer.suppression import UnusedSuppression

TOOL_NAME = "offload-fixer"
INFORMATION_URI = "https://pypi.org/project/offload-fixer/"
SARIF_VERSION = "2.1.0"
SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"


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
) -> str:
    """The whole output for ``--format fmt``, ending with a newline unless it is empty.
    ``marks``, ``verbose`` and ``tally`` are for the text formats. ``compilations``: the
    reports ``--confirm`` had the compiler judge; the machine formats record every verdict and
    every one the analysis did not predict (the text formats say those on stderr).

    Positions in notebooks, which count the lines of their code cells' program, are shown
    per cell (``nb.ipynb:cell 3:12:5``; in SARIF and GitHub annotations, where the ``.ipynb``
    file's own text is shown, at that cell line's place in the file).
    """
    given = list(diagnostics)
    diagnostics, file_errors, unused = _in_cells(given, list(file_errors), list(unused_suppressions))
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
        )
    if fmt == "json":
        document = format_json(
            diagnostics, file_errors, unused, target=target, jax_version=jax_version, compilations=compilations
        )
        return json.dumps(document, indent=2) + "\n"
    if fmt == "sarif":
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
        )
        return json.dumps(document, indent=2) + "\n"
    if fmt == "github":
        return format_github(diagnostics, file_errors, unused, root=root, compilations=compilations)
    raise ValueError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")


# ---------------------------------------------------------------------------------------
# Shared helpers
def _in_cells(
    diagnostics: list[Diagnostic], file_errors: list[FileError], unused: list[UnusedSuppression]
) -> tuple[list[Diagnostic], list[FileError], list[UnusedSuppression]]:
    """Everything that points into a notebook, in cell coordinates."""
    from offload_fixer.notebook import is_notebook

    paths: list[str | None] = [*(e.path for e in file_errors), *(u.path for u in unused)]
    paths += [s.path for d in diagnostics for s in _spans(d)] + [d.function.path for d in diagnostics if d.function]
    if not any(is_notebook(p) for p in paths if p):
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


def _in_file(span: Span) -> Span:
    """A span where the file's own text has it: a notebook cell's line in the ``.ipynb``."""
    if span.cell is None:
        return span
    from offload_fixer.notebook.positions import file_span

    return file_span(span)


def _cell_line(span: Span) -> str:
    from offload_fixer.notebook.positions import cell_line_text

    return cell_line_text(span)


def _cell_words(span: Span | None) -> str:
    """``In cell 3, line 12: `` for a position in a notebook (whose file position is the JSON's)."""
    return f"In cell {span.cell}, line {span.line}, column {span.col}: " if span is not None and span.cell else ""


def display_path(path: str, root: str | os.PathLike[str] | None = None) -> str:
    """``path`` relative to ``root`` with ``/`` separators, or absolute when outside it."""
    relative = _relative(path, root)
    return relative if relative is not None else os.path.abspath(path)


def _relative(path: str, root: str | os.PathLike[str] | None) -> str | None:
    base = os.path.abspath(root if root is not None else os.getcwd())
    try:
        return Path(os.path.abspath(path)).relative_to(base).as_posix()
    except ValueError:
        return None


def _sort_key(diagnostic: Diagnostic) -> tuple:
    span = primary_span(diagnostic)
    where = (span.path, span.cell or 0, span.line, span.col) if span else ("", 0, 0, 0)
    return (*where, diagnostic.code, diagnostic.output_path or "")


def _output_words(diagnostic: Diagnostic) -> str | None:
    if diagnostic.output_path is None and diagnostic.output_index is None:
        return None
    path = diagnostic.output_path if diagnostic.output_path else "the whole result"
    flat = f" (flat output {diagnostic.output_index})" if diagnostic.output_index is not None else ""
    return f"{path}{flat}"


def _origin_words(diagnostic: Diagnostic) -> str | None:
    origin = diagnostic.origin
    if origin is None:
        return None
    words = f"{origin.kind.replace('_', ' ')} ({origin.memory_kind})"
    return f"{words}: {origin.detail}" if origin.detail else words


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


# ---------------------------------------------------------------------------------------
# text
_STYLE = {"bold": "1", "red": "31", "yellow": "33", "cyan": "36", "green": "32", "dim": "2"}
_SEVERITY_COLOR = {"error": "red", "warning": "yellow", "info": "cyan"}
TRACE_STEPS_SHOWN = 3
"""Steps of a finding's trace shown without ``--verbose``."""
WRAP = 88


@dataclass(frozen=True)
class Tally:
    """What the closing lines of the text output count, besides the findings themselves."""

    checked: str | None = None
    """What was checked, in words (``"3 files checked"``); shown when nothing was found."""
    complete: bool = True
    """False when the check stopped early (the program under ``run`` failed)."""
    shown: bool = True
    """False for ``--quiet``: the findings only."""
    fixed: int | None = None
    """Findings ``--fix`` removed; ``None`` when nothing was fixed on purpose."""


def format_text(
    diagnostics: Sequence[Diagnostic],
    file_errors: Sequence[FileError] = (),
    unused_suppressions: Sequence[UnusedSuppression] = (),
    *,
    root: str | os.PathLike[str] | None = None,
    color: bool = False,
    marks: Mapping[Diagnostic, FixMark] | None = None,
    verbose: bool = False,
    concise: bool = False,
    tally: Tally | None = None,
) -> str:
    """ruff-like lines: one finding per root cause (``[*]`` when ``--fix`` fixes it), with
    its origin, the outputs it reaches, the start of its trace, why it matters and its fix;
    then a summary. ``concise``: the first line of each finding only."""

    def paint(text: str, *styles: str) -> str:
        if not color:
            return text
        return "\x1b[" + ";".join(_STYLE[s] for s in styles) + "m" + text + "\x1b[0m"

    def where(span: Span | None) -> str:
        if span is None:
            return "<unknown>"
        return position_text(display_path(span.path, root), span.line, span.col, span.cell)

    out: list[str] = []
    for error in sorted(file_errors, key=lambda e: (e.path, e.cell or 0, e.line, e.col)):
        head = paint(f"{where(error.span)}:", "bold")
        out.append(f"{head} {paint('error', 'red', 'bold')}: {error.message}")
    found = group_findings(diagnostics, marks)
    for finding in found:
        d = finding.head
        colour = _SEVERITY_COLOR.get(d.severity, "bold")
        star = f"{paint('[*]', 'green')} " if finding.fixable else ""
        out.append(
            f"{paint(where(primary_span(d)) + ':', 'bold')} {paint(d.code, colour, 'bold')} {star}"
            f"{paint(f'[{d.severity}]', colour)} {d.message}"
        )
        if not concise:
            out.extend(_finding_details(finding, where, paint, verbose))
    for unused in unused_suppressions:
        head = paint(f"{where(unused.span)}:", "bold")
        out.append(f"{head} {paint('warning', 'yellow')}: {unused.message}")
    out.extend(summary_lines(found, file_errors, tally or Tally()))
    return "\n".join(out) + ("\n" if out else "")


def _finding_details(finding: Finding, where, paint, verbose: bool) -> list[str]:
    d = finding.head
    lines = []
    origin = _origin_words(d)
    if origin:
        at = f" at {where(d.origin.span)}" if d.origin and d.origin.span else ""
        lines.append(f"  origin: {origin}{at}")
    locations = list(dict.fromkeys(where(primary_span(m)) for m in finding.diagnostics))
    if len(locations) > 1:
        lines.append(f"  also at: {', '.join(locations[1:])}")
    outputs = _outputs_reached(finding, where)
    if len(outputs) == 1:
        lines.append(f"  output: {outputs[0]}")
    elif outputs:
        lines.append(f"  outputs ({len(outputs)}):")
        lines.extend(f"    {output}" for output in outputs)
    shown = d.trace if verbose else d.trace[:TRACE_STEPS_SHOWN]
    for number, step in enumerate(shown, 1):
        at = f" at {where(step.span)}" if step.span else ""
        lines.append(f"  {number:>2}. {step.op} ({step.role}){at}")
    if len(d.trace) > len(shown):
        more = len(d.trace) - len(shown)
        lines.append(
            f"      ... {more} more step{'s' if more != 1 else ''} (--verbose shows {'them' if more != 1 else 'it'})"
        )
    if d.explanation:
        lines.extend(textwrap.wrap(d.explanation, WRAP, initial_indent="  why: ", subsequent_indent="       "))
    confirmed = [m.confirmed for m in finding.diagnostics if m.confirmed is not None]
    if confirmed:
        from offload_fixer.xla_messages import summary as xla_summary

        said = next((m.xla_message for m in finding.diagnostics if m.xla_message), None)
        by = next((f" by {m.confirmed_by}" for m in finding.diagnostics if m.confirmed_by), "")
        if all(confirmed):
            lines.append(f"  {paint('xla: confirmed' + by, 'green')}" + (f": {xla_summary(said)}" if said else ""))
        else:
            lines.append(
                f"  {paint('xla: not confirmed' + by, 'yellow')}"
                + (f": {xla_summary(said)}" if said else ": the compiler does not report this")
            )
    fix = finding.fix
    if fix is not None and fix.status == "applied":
        lines.append(f"  {paint('fix [*]', 'green')}: {fix.title}")
    elif fix is not None and fix.status == "unsafe":
        lines.append(f"  {paint('fix (unsafe: --fix --unsafe-fixes)', 'dim')}: {fix.title}")
    elif fix is not None:
        reason = f" ({fix.detail})" if fix.detail else ""
        lines.append(f"  {paint('fix (not automatic)', 'dim')}: {fix.title}{reason}")
    else:
        lines.extend(f"  help: {option.title}" for option in d.fixes if option.safety != "display-only")
    return lines


def _outputs_reached(finding: Finding, where) -> list[str]:
    """Each output the finding's host values reach, with the leaves that reach it when
    several do (the leaves of one streamed argument)."""
    sources: dict[str, list[str]] = {}
    for d in finding.diagnostics:
        output = _output_words(d)
        if output is None:
            continue
        returned = f", returned at {where(d.return_span)}" if d.return_span else ""
        label = d.origin.argument if d.origin and d.origin.argument else None
        sources.setdefault(output + returned, [])
        if label and label not in sources[output + returned]:
            sources[output + returned].append(label)
        for related in d.related_outputs:
            if not any(key.startswith(related or "the whole result") for key in sources):
                sources.setdefault(related or "the whole result", [])
    several = len({label for labels in sources.values() for label in labels}) > 1
    return [
        f"{output} from {', '.join(labels)}" if several and labels else output for output, labels in sources.items()
    ]


def summary_lines(found: Sequence[Finding], file_errors: Sequence[FileError], tally: Tally) -> list[str]:
    """``Found 2 problems (1 error, 1 warning).`` and what ``--fix`` can do, as ruff words it;
    ``All checks passed!`` with what was checked when there is nothing."""
    if not tally.shown:
        return []
    counts = {severity: 0 for severity in ("error", "warning", "info")}
    for finding in found:
        counts[finding.head.severity] = counts.get(finding.head.severity, 0) + 1
    parts = [
        _plural(n, name)
        for name, n in (("error", counts["error"]), ("warning", counts["warning"]), ("note", counts["info"]))
        if n
    ]
    if file_errors:
        parts.append(f"{_plural(len(file_errors), 'file')} not checked")
    lines = []
    if tally.fixed:
        remaining = f"{len(found)} remaining" + (f": {', '.join(parts)}" if parts else "")
        lines.append(f"Found {_plural(tally.fixed + len(found), 'problem')} ({tally.fixed} fixed, {remaining}).")
    elif found:
        lines.append(f"Found {_plural(len(found), 'problem')} ({', '.join(parts)}).")
    elif file_errors:
        lines.append(f"{_plural(len(file_errors), 'file')} could not be checked.")
    elif not tally.complete:
        lines.append(f"No problems found ({tally.checked})." if tally.checked else "No problems found.")
    else:
        lines.append(f"All checks passed! ({tally.checked})" if tally.checked else "All checks passed!")
    fixable = sum(f.fixable for f in found)
    unsafe = sum(f.fix is not None and f.fix.status == "unsafe" for f in found)
    hidden = f"{_plural(unsafe, 'unsafe fix', 'unsafe fixes')} available with `--fix --unsafe-fixes`" if unsafe else ""
    if fixable:
        lines.append(f"[*] {fixable} fixable with `--fix`" + (f" ({hidden})." if hidden else "."))
    elif hidden:
        lines.append(f"{hidden}.")
    return lines


def format_statistics(
    diagnostics: Sequence[Diagnostic],
    fmt: str,
    file_errors: Sequence[FileError] = (),
    marks: Mapping[Diagnostic, FixMark] | None = None,
    tally: Tally | None = None,
) -> str:
    """``--statistics``: findings counted per code, most frequent first, as ruff prints them
    (``count<TAB>code<TAB>[*] name``); ``json`` gives the same as a list."""
    from offload_fixer.rules import all_rules

    found = group_findings(diagnostics, marks)
    rows: dict[str, dict[str, Any]] = {}
    names = {rule.code: rule.name for rule in all_rules()}
    for finding in found:
        row = rows.setdefault(
            finding.head.code,
            {"code": finding.head.code, "name": names.get(finding.head.code, ""), "count": 0, "fixable": 0},
        )
        row["count"] += 1
        row["fixable"] += finding.fixable
    ordered = sorted(rows.values(), key=lambda r: (-r["count"], r["code"]))
    if fmt == "json":
        return json.dumps(ordered, indent=2) + "\n"
    width = max((len(str(r["count"])) for r in ordered), default=1)
    lines = [f"{r['count']:>{width}}\t{r['code']}\t{'[*]' if r['fixable'] else '[ ]'} {r['name']}" for r in ordered]
    lines += summary_lines(found, file_errors, tally or Tally())
    return "\n".join(lines) + "\n"


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


# ---------------------------------------------------------------------------------------
# json
def format_json(
    diagnostics: Sequence[Diagnostic],
    file_errors: Sequence[FileError] = (),
    unused_suppressions: Sequence[UnusedSuppression] = (),
    *,
    target: str | None = None,
    jax_version: str | None = None,
    compilations: Sequence[Report] = (),
) -> dict[str, Any]:
    """A :class:`Report` document (``Report.from_dict`` reads it back) plus what was not checked.
    With ``--confirm``, ``unpredicted`` lists every verdict the analysis did not predict
    (``function: difference``) and ``compilations`` every compiler verdict, in XLA's words."""
    report = Report(
        diagnostics=tuple(sorted(diagnostics, key=_sort_key)),
        target=target or _common_target(diagnostics),
        jax_version=jax_version or _installed_jax(),
        unpredicted=unpredicted(compilations),
    )
    document = report.to_dict()
    if compilations:
        document["compilations"] = [_verdict_record(compiled) for compiled in compilations]
    document["tool"] = {"name": TOOL_NAME, "version": __version__}
    document["file_errors"] = [dataclasses.asdict(e) for e in file_errors]
    document["unused_suppressions"] = [
        {"path": u.path, "line": u.line, "col": u.col, "cell": u.cell, "codes": list(u.codes), "message": u.message}
        for u in unused_suppressions
    ]
    return document


# ---------------------------------------------------------------------------------------
# sarif
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


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
) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run; files that could not be checked become notifications,
    and so does each ``--confirm`` verdict the analysis did not predict (every verdict is in
    the run's ``properties.compilations``)."""
    from offload_fixer.rules import all_rules

    target = target or _common_target(diagnostics)
    rules = all_rules()
    index = {rule.code: i for i, rule in enumerate(rules)}
    base = Path(root) if root is not None else Path.cwd()
    lines = _LineCache(sources or {})
    seen: dict[tuple[str, str, str], int] = {}
    results = []
    for d in sorted(diagnostics, key=_sort_key):
        result: dict[str, Any] = {
            "ruleId": d.code,
            "level": _SARIF_LEVEL.get(d.severity, "warning"),
            "message": {"text": _cell_words(primary_span(d)) + _sarif_message(d)},
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
            line_text = _cell_line(span) if span.cell is not None else lines.line(span.path, span.line)
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
        [_notification("error", _cell_words(e.span) + e.message, e.span, base, "file-error") for e in file_errors]
        + [
            _notification("warning", _cell_words(u.span) + u.message, u.span, base, "unused-suppression")
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
    )
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": TOOL_NAME,
                "version": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [_sarif_rule(rule, target, jax_version) for rule in rules],
            }
        },
        "invocations": [{"executionSuccessful": not file_errors, "toolExecutionNotifications": notifications}],
        "originalUriBaseIds": {SRCROOT: {"uri": Path(os.path.abspath(base)).as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": results,
        "properties": {"target": target, "jaxVersion": jax_version or _installed_jax()},
    }
    if compilations:
        run["properties"]["compilations"] = [_verdict_record(compiled) for compiled in compilations]
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


def _sarif_message(d: Diagnostic) -> str:
    parts = [d.message if d.message.endswith(".") else f"{d.message}."]
    output = _output_words(d)
    if output:
        parts.append(f"Output: {output}.")
    origin = _origin_words(d)
    if origin:
        parts.append(f"Origin: {origin}.")
    return " ".join(parts)


def _artifact(path: str, base: Path) -> dict[str, Any]:
    """Repository-relative URIs (GitHub matches alerts by them); absolute outside the root."""
    relative = _relative(path, base)
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
    return {"artifactLocation": _artifact(span.path, base), "region": _region(_in_file(span))}


def _trail(d: Diagnostic) -> list[tuple[Span, str]]:
    """The located points of a diagnostic's story, in order: origin, each step, the return."""
    trail = []
    if d.origin and d.origin.span:
        trail.append((d.origin.span, f"Host memory starts here: {_origin_words(d)}"))
    for number, step in enumerate(d.trace, 1):
        if step.span:
            trail.append((step.span, f"Step {number}: {step.op} ({step.role})"))
    if d.return_span:
        trail.append((d.return_span, f"Returned here as output {_output_words(d) or ''}".rstrip()))
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


# ---------------------------------------------------------------------------------------
# github
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
    message = _cell_words(span) + message
    span = _in_file(span)
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
    for d in sorted(diagnostics, key=_sort_key):
        span = primary_span(d)
        lines = [f"{d.code} {d.message}"]
        output = _output_words(d)
        if output:
            lines.append(f"output: {output}")
        origin = _origin_words(d)
        if origin:
            lines.append(f"origin: {origin}")
        lines += [f"fix ({fix.safety}): {fix.title}" for fix in d.fixes]
        level = _GITHUB_LEVEL.get(d.severity, "warning")
        if span is None:
            out.append(f"::{level} title={escape_property(d.code)}::{escape_data(chr(10).join(lines))}")
        else:
            out.append(_github_command(level, span, d.code, "\n".join(lines), root))
    for unused in unused_suppressions:
        out.append(_github_command("warning", unused.span, "offload-fixer", unused.message, root))
    return "\n".join(out) + ("\n" if out else "")


# ---------------------------------------------------------------------------------------
# --confirm's verdicts
def unpredicted(compilations: Sequence[Report]) -> tuple[str, ...]:
    """Every verdict of the compiler the analysis did not predict, named by its function."""
    return tuple(f"{_compilation_name(c)}: {difference}" for c in compilations for difference in c.unpredicted)


def _compilation_name(report: Report) -> str:
    return report.function.name if report.function else report.module_name or "(module)"


def _verdict_record(report: Report) -> dict[str, Any]:
    """One compilation as ``--confirm`` judged it: the compiler's whole verdict (its error
    text as XLA raised it) beside what the analysis predicted."""
    return {
        "function": _compilation_name(report),
        "module": report.module_name,
        "predicted": dataclasses.asdict(report.predicted) if report.predicted else None,
        "xla": dataclasses.asdict(report.xla) if report.xla else None,
        "unpredicted": list(report.unpredicted),
    }


# ---------------------------------------------------------------------------------------
def _common_target(diagnostics: Sequence[Diagnostic]) -> str:
    targets = {d.target for d in diagnostics}
    return targets.pop() if len(targets) == 1 else "tpu"


def _installed_jax() -> str:
    from offload_fixer.jax_compat import UnsupportedJaxVersion, installed_version

    try:
        return installed_version()
    except UnsupportedJaxVersion:
        return "unknown"
