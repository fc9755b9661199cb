"""The ``text`` and ``concise`` formats, ruff-like, and ``--statistics``."""

from __future__ import annotations

import json
import os
import textwrap
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from offload_fixer.findings import Finding, FixMark, group_findings
from offload_fixer.findings import location as primary_span
from offload_fixer.model import (
    WHOLE_RESULT,
    Diagnostic,
    FunctionRef,
    Report,
    Sharding,
    Span,
    format_output_path,
    leaves_in_words,
    mesh_text,
    parse_output_path,
    position_text,
)
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
    trees: Mapping[FunctionRef, frozenset[str]] | None = None,
) -> str:
    """ruff-like lines: one finding per root cause (``[*]`` when ``--fix`` fixes it), with
    its origin, the outputs it reaches, the start of its trace, why it matters and its fix;
    then a summary. ``concise``: the first line of each finding only. ``trees``: every flat
    output of each function (:func:`output_trees`), where known: outputs a finding reaches
    are shown by the whole sub-trees they make up."""

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
            out.extend(_finding_details(finding, where, paint, verbose, trees or {}))
    for unused in unused_suppressions:
        head = paint(f"{where(unused.span)}:", "bold")
        out.append(f"{head} {paint('warning', 'yellow')}: {unused.message}")
    out.extend(summary_lines(found, file_errors, tally or Tally()))
    return "\n".join(out) + ("\n" if out else "")


def _finding_details(
    finding: Finding, where, paint, verbose: bool, trees: Mapping[FunctionRef, frozenset[str]]
) -> list[str]:
    d = finding.head
    lines = []
    origin = origin_words(d)
    if origin:
        at = f" at {where(d.origin.span)}" if d.origin and d.origin.span else ""
        lines.append(f"  origin: {origin}{at}")
    locations = list(dict.fromkeys(where(primary_span(m)) for m in finding.diagnostics))
    if len(locations) > 1:
        lines.append(f"  also at: {', '.join(locations[1:])}")
    count, outputs = _outputs_reached(finding, where, trees.get(d.function) if d.function else None)
    if count == 1:
        lines.append(f"  output: {outputs[0]}")
    elif outputs:
        lines.append(f"  outputs ({count}):")
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
    body = textwrap.wrap(fix.body, WRAP, initial_indent=" " * 11, subsequent_indent=" " * 11) if fix else []
    if fix is not None and fix.status == "applied":
        lines.append(f"  {paint('fix [*]', 'green')}: {fix.title}")
        lines.extend(body)
    elif fix is not None and fix.status == "unsafe":
        lines.append(f"  {paint('fix (unsafe: --fix --unsafe-fixes)', 'dim')}: {fix.title}")
        lines.extend(body)
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


@dataclass
class _Reached:
    """One output a finding's host values reach: its flat index, where it is returned, and
    the argument leaves that reach it."""

    index: int | None = None
    returned: str = ""
    sources: list[str] = field(default_factory=list)


def _outputs_reached(finding: Finding, where, tree: frozenset[str] | None) -> tuple[int, list[str]]:
    """(how many outputs the finding's host values reach, a line for each, or for each whole
    sub-tree of the function's outputs they all reach where ``tree`` (every flat output's
    path) says which sub-trees are whole), each output once, with the argument leaves that
    reach it where several do (the leaves of one streamed argument)."""
    reached: dict[str, _Reached] = {}
    for d in finding.diagnostics:
        if output_words(d) is None:
            continue
        entry = reached.setdefault(d.output_path or "", _Reached())
        if entry.index is None:
            entry.index = d.output_index
        if d.return_span and not entry.returned:
            entry.returned = f", returned at {where(d.return_span)}"
        if d.origin and d.origin.argument and d.origin.argument not in entry.sources:
            entry.sources.append(d.origin.argument)
        for related in d.related_outputs:
            reached.setdefault(related, _Reached())
    several = len({label for entry in reached.values() for label in entry.sources}) > 1
    lines = []
    for at, members in _whole_subtrees(reached, tree).items():
        sources = [label for path in members for label in reached[path].sources]
        source = f" from {leaves_in_words(sources)}" if several and sources else ""
        if len(members) == 1 and at == members[0]:
            entry = reached[at]
            flat = f" (flat output {entry.index})" if entry.index is not None else ""
            lines.append(f"{at or WHOLE_RESULT}{flat}{entry.returned}{source}")
            continue
        indexes = sorted(i for path in members if (i := reached[path].index) is not None)
        flat = f", flat outputs {indexes[0]}-{indexes[-1]}" if len(indexes) == len(members) else ""
        lines.append(f"{at or WHOLE_RESULT} ({len(members)} leaves{flat}){source}")
    return len(reached), lines


def _whole_subtrees(reached: Mapping[str, _Reached], tree: frozenset[str] | None) -> dict[str, list[str]]:
    """Each reached output under the widest sub-tree of the function's outputs (``tree``) that
    holds two or more outputs and only reached ones, keyed by that sub-tree's path, in the
    order of the flat outputs; each output alone where no such sub-tree holds it (or the tree
    is not known: the source check's findings)."""
    order = sorted(reached, key=lambda path: (reached[path].index is None, reached[path].index or 0))
    if not tree or not set(reached) <= tree:
        return {path: [path] for path in order}
    leaves = {path: parse_output_path(path) for path in tree}
    outputs: Counter[tuple] = Counter()
    """How many flat outputs each sub-tree holds, and (below) how many of them are reached."""
    hit: Counter[tuple] = Counter()
    for path, keys in leaves.items():
        for depth in range(len(keys) + 1):
            outputs[keys[:depth]] += 1
            hit[keys[:depth]] += path in reached
    groups: dict[str, list[str]] = {}
    for path in order:
        keys = leaves[path]
        whole = next((keys[:d] for d in range(len(keys)) if 1 < outputs[keys[:d]] == hit[keys[:d]]), None)
        groups.setdefault(path if whole is None else format_output_path(whole), []).append(path)
    return groups


def output_trees(reports: Iterable[Report]) -> dict[FunctionRef, frozenset[str]]:
    """Every flat output's path of each jitted function the reports lowered (of all its
    compilations): what tells the text output which sub-trees a finding reaches whole."""
    trees: dict[FunctionRef, frozenset[str]] = {}
    for report in reports:
        if report.function is not None and report.outputs:
            trees[report.function] = trees.get(report.function, frozenset()) | {o.path for o in report.outputs}
    return trees


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
