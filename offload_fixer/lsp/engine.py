"""The language server's link to the rest of offload-fixer: check a text, describe its fixes,
compute the fixed text. Plain data in and out, no LSP types, so it runs in a worker thread.

Everything works on the editor's in-memory text, never on the file on disk: the static
check takes text, and fixes are planned and made from that text the one way the command line
makes them (``fixes.apply.fix_text``). Each document keeps a
:class:`offload_fixer.static.SourceCache`, so a change re-parses only the top-level statement
it touched.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offload_fixer.config import Settings
from offload_fixer.lsp.dynamic import LastRunFeed
from offload_fixer.lsp.fix_choices import FixChoice, encoded, encoding_of, fix_choices
from offload_fixer.lsp.superseding import Superseded, Ticket, cut_short
from offload_fixer.model import Diagnostic, Origin, Report, Span

if TYPE_CHECKING:
    from offload_fixer.fixes import FixPlan
    from offload_fixer.static import SourceCache

_CACHE_SIZE = 16
MAX_DOCUMENT_CHARS = 1_000_000
"""Larger documents are not analysed as you type: the check runs at roughly 0.1-0.2 MB/s on
one core (libcst's parse dominates), so a 5 MB file would take about a minute after every
change. They are refused with a message instead (``benchmarks/lsp_latency.py --large`` times both)."""


@dataclass(frozen=True)
class Analysis:
    """What one text produced: diagnostics with their fix choices; ``parse_error`` when the
    text is not Python (then there are no diagnostics: stale ones must disappear)."""

    diagnostics: tuple[Diagnostic, ...] = ()
    fixes: tuple[tuple[FixChoice, ...], ...] = ()
    parse_error: str | None = None
    refused: str | None = None
    """Why the text was not analysed at all (too large); the editor is told once."""
    dependencies: tuple[tuple[str, Any], ...] = ()
    """Other modules of the project the check read, with their stamps: a cached analysis
    holds while they are unchanged on disk."""
    planned: bool = True
    """False when the fix choices were not planned yet (each diagnostic's are then empty):
    the editor is shown the findings first, their quick fixes after (``analyse(plan=False)``)."""

    def items(self) -> Iterator[tuple[Diagnostic, tuple[FixChoice, ...]]]:
        return zip(self.diagnostics, self.fixes)


_cache: OrderedDict[tuple[Any, ...], Analysis] = OrderedDict()
_sources: OrderedDict[str, SourceCache] = OrderedDict()
"""Per document: its parsed top-level statements, so that a change re-parses only its own."""


def analyse(text: str, path: str, settings: Settings, plan: bool = True, ticket: Ticket | None = None) -> Analysis:
    """Static check, code selection and suppression comments, as ``offload-fixer check`` does;
    cached by text and settings, so saving an analysed text costs nothing. ``plan``: also plan
    each finding's fix choices (which costs more than a change's check: the planner reads the
    whole text); a later call with ``plan`` adds them to the cached analysis. ``ticket``: the
    planning stops once a change supersedes it (:mod:`.superseding`), and the analysis is
    returned unplanned."""
    key = (hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest(), path, _settings_key(settings))
    cached = _cache.get(key)
    if cached is not None and all(_project(settings).stamp(p) == stamp for p, stamp in cached.dependencies):
        _cache.move_to_end(key)
        if plan and not cached.planned:
            cached = _cache[key] = _planned(cached, text, path, settings, ticket)
        return cached
    result = _analyse(text, path, settings)
    if plan:
        result = _planned(result, text, path, settings, ticket)
    _cache[key] = result
    if len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)
    return result


def _analyse(text: str, path: str, settings: Settings) -> Analysis:
    from offload_fixer.static import check_source

    if os.path.isabs(path) and settings.is_excluded(path):
        return Analysis()
    if len(text) > MAX_DOCUMENT_CHARS:
        return Analysis(
            refused=(
                f"{os.path.basename(path)} has {len(text):,} characters, over the {MAX_DOCUMENT_CHARS:,} the language "
                "server analyses as you type; run `offload-fixer check` on it instead"
            )
        )
    project = _project(settings)
    result = check_source(
        text,
        path,
        target=settings.target,
        jax_version=settings.jax_version,
        cache=_source_cache(path),
        project=project,
        python=settings.python,
    )
    if result.parse_error is not None:
        return Analysis(parse_error=str(result.parse_error))
    if result.internal_error is not None:
        return Analysis(refused=result.internal_error)
    # A finding of another file (reached through an import) is that file's to show.
    mine = [d for d in result.diagnostics if same_path(_primary_path(d), path)]
    kept = _reportable(mine, text, path, settings)
    dependencies = tuple((p, project.stamp(p)) for p in result.dependencies)
    return Analysis(tuple(kept), tuple(() for _ in kept), dependencies=dependencies, planned=not kept)


def _planned(analysis: Analysis, text: str, path: str, settings: Settings, ticket: Ticket | None = None) -> Analysis:
    """``analysis`` with its fix choices, or as it is where a change supersedes ``ticket`` first."""
    if analysis.planned:
        return analysis
    try:
        with cut_short(ticket):
            choices = fix_choices(analysis.diagnostics, text, path, settings, _outline_of(path, text), ticket=ticket)
    except Superseded:
        return analysis
    return replace(analysis, fixes=choices, planned=True)


def _outline_of(path: str, text: str) -> Any:
    """The check's own outline of ``text``, when it is still the latest the document's cache holds."""
    found = _source_cache(path).outline
    return found if found is not None and found.text == text else None


def document_analysis(
    text: str, path: str, settings: Settings, plan: bool = True, ticket: Ticket | None = None
) -> Analysis:
    """What the editor shows: the static check, and the last ``offload-fixer run``'s findings
    in this document while it still holds the lines they name (:mod:`.dynamic`). A static
    finding the run also made is shown once, as the run's. ``plan``: with the fix choices,
    unless a change supersedes ``ticket`` first (then ``planned`` is False)."""
    static, runs, dynamic = _findings(text, path, settings, plan, ticket)
    if not dynamic:
        return static
    seen = {_identity(d) for d in dynamic}
    items = [(d, f) for d, f in static.items() if _identity(d) not in seen]
    choices: tuple[tuple[FixChoice, ...], ...] = tuple(() for _ in dynamic)
    planned = plan and static.planned
    if planned:
        try:
            with cut_short(ticket):
                choices = fix_choices(
                    dynamic,
                    text,
                    path,
                    settings,
                    _outline_of(path, text),
                    reports=runs,
                    measured=_LAST_RUN.fixes(path, encoded(text)),
                    ticket=ticket,
                )
        except Superseded:
            planned = False
    items += zip(dynamic, choices)
    return Analysis(
        tuple(d for d, _ in items), tuple(f for _, f in items), dependencies=static.dependencies, planned=planned
    )


def _findings(
    text: str, path: str, settings: Settings, plan: bool = True, ticket: Ticket | None = None
) -> tuple[Analysis, tuple[Report, ...], list[Diagnostic]]:
    """The static analysis, the last run's reports placed in this text, and their findings shown."""
    static = analyse(text, path, settings, plan, ticket)
    if static.parse_error is not None or static.refused is not None:
        return static, (), []
    runs = _LAST_RUN.reports(path, text, encoded(text))
    return static, runs, _reportable([d for report in runs for d in report.diagnostics], text, path, settings)


def _shown(text: str, path: str, settings: Settings) -> tuple[list[Diagnostic], tuple[Report, ...]]:
    """The diagnostics :func:`document_analysis` shows (without planning their fixes), and the
    run's reports they come with."""
    static, runs, dynamic = _findings(text, path, settings, plan=False)
    seen = {_identity(d) for d in dynamic}
    return [d for d in static.diagnostics if _identity(d) not in seen] + dynamic, runs


def _reportable(diagnostics: Sequence[Diagnostic], text: str, path: str, settings: Settings) -> list[Diagnostic]:
    from offload_fixer.suppression import filter_suppressed

    selected = settings.reportable(diagnostics)
    if not selected:
        return []
    found = _outline_of(path, text)
    kept, _, _ = filter_suppressed(selected, {path: text}, chunks={path: None if found is None else found.spans})
    return list(kept)


def _identity(d: Diagnostic) -> tuple:
    span = primary_span(d)
    return d.code, span.line if span else None, d.output_path


def _primary_path(d: Diagnostic) -> str | None:
    span = primary_span(d)
    return span.path if span else None


_projects: dict[Any, Any] = {}
_LAST_RUN = LastRunFeed()


def _project(settings: Settings):
    """One project per root, kept across analyses (it re-reads what changed on disk)."""
    from offload_fixer.static.project import Project

    key = str(settings.root) if settings.root else None
    project = _projects.get(key)
    if project is None:
        project = _projects[key] = Project((key,) if key else ())
    return project


def _source_cache(path: str) -> SourceCache:
    from offload_fixer.static import SourceCache

    cache = _sources.get(path)
    if cache is None:
        cache = _sources[path] = SourceCache()
        if len(_sources) > _CACHE_SIZE:
            _sources.popitem(last=False)
    else:
        _sources.move_to_end(path)
    return cache


def forget(path: str) -> None:
    """Drop what is kept for a document the editor closed."""
    _sources.pop(path, None)


def apply_fix(text: str, path: str, diagnostic: Diagnostic, strategy: str, settings: Settings) -> str | None:
    """The text after the quick fix for ``diagnostic`` (safe or not: the user picked it): the
    plan, among those for every finding shown for the text, that fixes it (its root cause's
    plan, which may fix other findings too); ``None`` when no edit can be made."""
    shown, runs = _shown(text, path, settings)
    others = [d for d in shown if d != diagnostic]
    plans = plan_on_text([diagnostic, *others], text, path, strategy, settings, runs)
    return _apply(text, path, [p for p in _held(plans, text, path) if diagnostic in p.covered], unsafe=True)


def fix_all(text: str, path: str, settings: Settings) -> str | None:
    """The text after every safe fix of the findings shown, as ``offload-fixer check --fix``
    writes the file."""
    analysis = analyse(text, path, settings, plan=False)
    if analysis.parse_error is not None or analysis.refused is not None:
        return None
    shown, runs = _shown(text, path, settings)
    if not shown:
        return None
    plans = plan_on_text(shown, text, path, settings.strategy, settings, runs)
    return _apply(text, path, _held(plans, text, path), unsafe=False)


def _held(plans: list[FixPlan], text: str, path: str) -> list[FixPlan]:
    """``plans`` less those the last run's verification refused for this very text."""
    refused = {title for title, fix in _LAST_RUN.fixes(path, encoded(text)).items() if fix.refused}
    return [plan for plan in plans if plan.title not in refused]


def plan_on_text(
    diagnostics: Sequence[Diagnostic],
    text: str,
    path: str,
    strategy: str,
    settings: Settings,
    reports: Sequence[Report] = (),
) -> list[FixPlan]:
    """``plan_fixes`` against the editor's text instead of the file on disk (``reports``: a
    run's, for its findings' output trees)."""
    from offload_fixer.fixes import plan_fixes

    return plan_fixes(
        diagnostics, strategy=strategy, jax_version=settings.jax_version, texts={path: encoded(text)}, reports=reports
    )


def _apply(text: str, path: str, plans: list[FixPlan], unsafe: bool) -> str | None:
    """The text after ``plans``, chosen and made the way ``offload-fixer check --fix`` chooses
    and makes them (``unsafe``: as with ``--unsafe-fixes``; :func:`~offload_fixer.fixes.apply.choose_plans`,
    :func:`~offload_fixer.fixes.apply.fix_text`); ``None`` when nothing can be made."""
    from offload_fixer.fixes import FixError
    from offload_fixer.fixes.apply import choose_plans, fix_text

    plans, _ = choose_plans(plans, unsafe)
    if not plans:
        return None
    try:
        fixed, _ = fix_text(path, text, plans, encoding=encoding_of(text), original=encoded(text))
    except FixError:
        return None
    return fixed


def _verified(path: str, text: str) -> str | None:
    """``text`` if it parses and compiles (the fixer's own check), else ``None``."""
    from offload_fixer.fixes import FixError
    from offload_fixer.fixes.apply import verify

    try:
        verify(path, encoded(text))
    except FixError:
        return None
    return text


def suppress(text: str, path: str, line: int, code: str) -> str | None:
    """The text with ``# offload-fixer: ignore[CODE]`` on its own line above the statement
    that holds ``line`` (1-based): the placement :mod:`offload_fixer.suppression` reads as
    covering that whole statement (the whole function for a decorator or ``def`` line)."""
    import libcst as cst

    from offload_fixer.source.metadata import node_positions
    from offload_fixer.suppression import MARKER

    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None
    positions = node_positions(module)
    best: tuple[int, cst.SimpleStatementLine | cst.BaseCompoundStatement] | None = None
    for node, where in positions.items():
        if not isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            continue
        decorators = getattr(node, "decorators", ())
        first = positions[decorators[0]].start.line if decorators else where.start.line
        if first <= line <= where.end.line and (best is None or first >= best[0]):
            best = (first, node)
    if best is None:
        return None
    node = best[1]
    directive = cst.EmptyLine(comment=cst.Comment(f"# {MARKER}: ignore[{code}]"))
    fixed = module.deep_replace(node, node.with_changes(leading_lines=[*node.leading_lines, directive]))
    assert isinstance(fixed, cst.Module), "replacing a statement keeps the module"
    return _verified(path, fixed.code)


# ---------------------------------------------------------------------------------------
# Words and paths for the editor
def primary_span(diagnostic: Diagnostic) -> Span | None:
    from offload_fixer.report import primary_span as report_span

    return report_span(diagnostic)


def rule_title(code: str) -> str:
    from offload_fixer.rules import UnknownRule, get_rule

    try:
        return get_rule(code).summary
    except UnknownRule:
        return code


def rule_url(code: str) -> str | None:
    from offload_fixer.rules import UnknownRule, get_rule

    try:
        references = get_rule(code).references
    except UnknownRule:
        return None
    return references[0] if references else None


def related_spans(diagnostic: Diagnostic) -> list[tuple[Span, str]]:
    """The places a finding links to, in the order a reader follows the value: the move to
    host, each step of its trace (once per place), the output it reaches."""
    found: list[tuple[Span, str]] = []
    origin = diagnostic.origin
    if origin is not None and origin.span is not None:
        found.append((origin.span, origin_words(origin)))
    shown = {origin.span if origin else None, diagnostic.return_span}
    for step in diagnostic.trace:
        if step.span not in shown and step.span is not None:
            shown.add(step.span)
            found.append((step.span, f"then {step.op} ({step.role})"))
    if diagnostic.return_span is not None:
        found.append((diagnostic.return_span, output_words(diagnostic)))
    return found


def origin_words(origin: Origin) -> str:
    return origin.detail or f"value moved to {origin.memory_kind} here"


def output_words(diagnostic: Diagnostic) -> str:
    where = f"output {diagnostic.output_path}" if diagnostic.output_path else "the result"
    return f"returned here as {where}, whose memory kind is device"


def same_path(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


def uri_of(path: str) -> str:
    return Path(os.path.abspath(path)).as_uri()


def _settings_key(settings: Settings) -> tuple[Any, ...]:
    return (
        settings.target,
        settings.target_version,
        settings.strategy,
        settings.jax_version,
        settings.selected,
        settings.ignore,
        settings.per_file_ignores,
        settings.exclude,
        settings.extend_exclude,
        settings.root,
    )
