"""The ``text`` and ``concise`` formats, ruff-like, and ``--statistics``."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from offload_fixer.findings import Finding, FixMark, group_findings
from offload_fixer.findings import location as primary_span
from offload_fixer.model import Diagnostic, Sharding, Span, mesh_text, position_text
from offload_fixer.report.places import FileError, display_path, origin_words, output_words

if TYPE_CHECKING:
    from offload_fixer.suppression import UnusedSuppression

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
    fix_only: bool = False
    """``--fix-only``: only what was fixed is said (``Fixed 2 problems.``), as ruff says it."""


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
    origin = origin_words(d)
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
    lines.extend(_sharding_lines(finding))
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
        if fix.detail:
            lines.extend(textwrap.wrap(fix.detail, WRAP, initial_indent="  unsafe: ", subsequent_indent="          "))
    elif fix is not None:
        reason = f" ({fix.detail})" if fix.detail else ""
        lines.append(f"  {paint('fix (not automatic)', 'dim')}: {fix.title}{reason}")
    else:
        lines.extend(f"  help: {option.title}" for option in d.fixes if option.safety != "display-only")
    return lines


def _sharding_lines(finding: Finding) -> list[str]:
    """How the host arguments and the outputs of a finding are laid out over a partitioned
    module's devices (a pod's mesh): the mesh once, then each value and one device's piece."""
    laid_out: dict[str, Sharding] = {}
    for d in finding.diagnostics:
        if d.origin is not None and d.origin.sharding is not None and d.origin.argument:
            laid_out.setdefault(d.origin.argument, d.origin.sharding)
        if d.sharding is not None:
            laid_out.setdefault(d.output_path or f"output {d.output_index}", d.sharding)
    if not laid_out:
        return []
    mesh = next((s.mesh for s in laid_out.values() if s.mesh), ())
    lines = [f"  sharded over {mesh_text(mesh)}:" if mesh else "  sharded:"]
    lines.extend(f"    {name}: {sharding.layout()}" for name, sharding in laid_out.items())
    return lines


def _outputs_reached(finding: Finding, where) -> list[str]:
    """Each output the finding's host values reach, with the leaves that reach it when
    several do (the leaves of one streamed argument)."""
    sources: dict[str, list[str]] = {}
    for d in finding.diagnostics:
        output = output_words(d)
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
    if tally.fix_only:
        unchecked = [f"{_plural(len(file_errors), 'file')} could not be checked."] if file_errors else []
        return unchecked + ([f"Fixed {_plural(tally.fixed, 'problem')}."] if tally.fixed else [])
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
    from offload_fixer.codes import NAMES, TOOL_NAMES

    found = group_findings(diagnostics, marks)
    rows: dict[str, dict[str, Any]] = {}
    names = {**TOOL_NAMES, **NAMES}
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
