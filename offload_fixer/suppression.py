"""``# offload-fixer: ignore[OFL1200]`` comments (and ruff's ``# noqa: OFL1200``): which
diagnostics they silence, which are unused.

A directive silences the diagnostics whose location, origin or return statement falls in
the code it is attached to:

* a comment on any line of a statement, multi-line ones included, covers that statement;
* a comment on a decorator or on the ``def`` line of a function covers the whole function;
* a comment on the header of another compound statement (``with``, ``for``...) covers the
  header;
* a comment alone on its line covers the statement right below it.

ruff's spelling is honoured as ruff honours it: ``# noqa: OFL1200`` (codes of other tools on
it are theirs) and a bare ``# noqa`` silence the findings that point at their own line (the
underline, the origin, the return or the ``def``), never a whole statement. An unused
``# noqa: OFL…`` code is reported like an unused directive; a bare ``# noqa`` is anyone's, so
it never is.

Comments are found with ``tokenize`` (cheap). Statement extents need libcst positions,
which cost about three times a parse, so they are computed only for a file where a
diagnostic is left that one of its directives could cover once statements are known; a
directive on the diagnostic's own line never needs them.
"""

from __future__ import annotations

import io
import os
import re
import tokenize
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from offload_fixer import codes
from offload_fixer.model import Diagnostic, Span

MARKER = "offload-fixer"
_DIRECTIVE = re.compile(r"#\s*offload-fixer\s*:\s*ignore(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)
NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
"""ruff's ``# noqa`` and ``# noqa: CODE, CODE`` (its own pattern)."""
CODE_PREFIX = "OFL"


@dataclass(frozen=True)
class Suppression:
    """One directive as written; ``codes`` is empty for a bare ``ignore``."""

    path: str
    line: int
    col: int
    codes: tuple[str, ...]
    standalone: bool
    """Nothing but the comment is on its line."""
    noqa: bool = False
    """ruff's ``# noqa``: its own line only; a bare one is never reported unused."""


@dataclass(frozen=True)
class UnusedSuppression:
    path: str
    line: int
    col: int
    codes: tuple[str, ...]
    """The codes that silenced nothing (or are unknown); empty when a bare ``ignore`` was unused."""
    reason: str = "unused"
    cell: int | None = None
    """The notebook cell ``line`` counts in, as :attr:`Span.cell`."""
    noqa: bool = False
    """Written as ruff's ``# noqa: OFL…``."""

    @property
    def span(self) -> Span:
        return Span(self.path, self.line, self.col, cell=self.cell)

    @property
    def message(self) -> str:
        kind = "`# noqa`" if self.noqa else "offload-fixer suppression"
        if self.reason == "unknown":
            return f"unknown code in {kind}: {', '.join(self.codes)}"
        if self.codes:
            return f"unused {kind}: {', '.join(self.codes)}"
        return f"unused {kind}"


def find_suppressions(path: str, source: str, chunks: Sequence[tuple[int, int]] | None = None) -> list[Suppression]:
    """Every directive in ``source``; a file that does not tokenize has none we can trust.
    ``chunks``: the spans of the text's top-level statements (:mod:`.static.outline`), each
    of which tokenizes alone: only those that spell a directive are tokenized, and what each
    holds is kept by its text (the language server asks again after every edit)."""
    if MARKER not in source and "noqa" not in source.lower():
        return []
    if not chunks:
        return [Suppression(path, *found) for found in _directives(source)]
    result: list[Suppression] = []
    line = 0
    for start, end in chunks:
        text = source[start:end]
        if MARKER in text or "noqa" in text.lower():
            kept = _CHUNK_DIRECTIVES.get(text)
            if kept is None:
                kept = _CHUNK_DIRECTIVES[text] = tuple(_directives(text))
                if len(_CHUNK_DIRECTIVES) > _CHUNKS_KEPT:
                    _CHUNK_DIRECTIVES.pop(next(iter(_CHUNK_DIRECTIVES)))
            result.extend(Suppression(path, found[0] + line, *found[1:]) for found in kept)
        line += text.count("\n")  # as ``generate_tokens`` over the whole text counts lines
    return result


_CHUNK_DIRECTIVES: dict[str, tuple[tuple, ...]] = {}
_CHUNKS_KEPT = 256


def _directives(source: str) -> list[tuple]:
    """``Suppression``'s fields after ``path``, for each directive of ``source``."""
    found: list[tuple] = []
    lines = source.splitlines()
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type != tokenize.COMMENT:
                continue
            for match in _DIRECTIVE.finditer(token.string):
                codes_text = match.group("codes")
                codes = () if codes_text is None else _split_codes(codes_text)
                line, col = token.start
                standalone = not lines[line - 1][:col].strip()
                found.append((line, col + match.start() + 1, codes, standalone))
            for match in NOQA.finditer(token.string):
                codes_text = match.group("codes")
                codes = () if codes_text is None else _split_codes(codes_text)
                ours = tuple(code for code in codes if code.startswith(CODE_PREFIX))
                if codes and not ours:  # codes of another tool only (F401): theirs
                    continue
                line, col = token.start
                found.append((line, col + match.start() + 1, ours, False, True))
    except (tokenize.TokenError, SyntaxError):
        return found
    return found


def _split_codes(text: str) -> tuple[str, ...]:
    return tuple(code.strip().upper() for code in re.split(r"[,\s]+", text) if code.strip())


def filter_suppressed(
    diagnostics: Iterable[Diagnostic],
    sources: Mapping[str, str],
    enabled: Collection[str] | None = None,
    chunks: Mapping[str, Sequence[tuple[int, int]] | None] | None = None,
) -> tuple[list[Diagnostic], list[Diagnostic], list[UnusedSuppression]]:
    """Split ``diagnostics`` into (kept, suppressed) and list the directives that silenced nothing.

    ``sources`` maps each file to its text; only directives in these files count.
    ``enabled`` is the set of codes this run could report: a directive for a code that was
    not checked is not called unused (``None``: every known code was checked). ``chunks``:
    the spans of a file's top-level statements, where known (:func:`find_suppressions`).
    """
    known = set(codes.SELECTABLE_CODES)
    enabled_codes = known if enabled is None else set(enabled)
    diagnostics = list(diagnostics)
    texts = {_key(path): source for path, source in sources.items()}
    # First every directive covers only its own line; statement extents are computed only
    # for files where that leaves a diagnostic that one of their directives could cover.
    by_file: dict[str, list[tuple[Suppression, tuple[int, int]]]] = {}
    for path, source in sources.items():
        found = find_suppressions(path, source, (chunks or {}).get(path))
        if found:
            by_file[_key(path)] = [(suppression, (suppression.line, suppression.line)) for suppression in found]
    kept, suppressed, used = _match(diagnostics, by_file)
    widen = {
        _key(span.path)
        for diagnostic in kept
        for span in _anchors(diagnostic)
        if any(_covers_code(s, diagnostic.code) for s, _ in by_file.get(_key(span.path), ()))
    }
    if widen:
        for key in widen:
            extents = _StatementExtents.of(texts[key])
            by_file[key] = [(s, (s.line, s.line) if s.noqa else extents.region(s)) for s, _ in by_file[key]]
        kept, suppressed, used = _match(diagnostics, by_file)

    unused = []
    for entries in by_file.values():
        for suppression, _ in entries:
            unknown = tuple(code for code in suppression.codes if code not in known)
            if unknown:
                unused.append(_unused(suppression, unknown, "unknown"))
            silenced = used.get(suppression, set())
            if not suppression.codes:
                if not silenced and not suppression.noqa:
                    unused.append(_unused(suppression, (), "unused"))
                continue
            idle = tuple(
                code for code in suppression.codes if code in known and code in enabled_codes and code not in silenced
            )
            if idle:
                unused.append(_unused(suppression, idle, "unused"))
    unused.sort(key=lambda u: (u.path, u.line, u.col))
    return kept, suppressed, unused


def _unused(s: Suppression, codes: tuple[str, ...], reason: str) -> UnusedSuppression:
    return UnusedSuppression(s.path, s.line, s.col, codes, reason, noqa=s.noqa)


_Regions = Mapping[str, Sequence[tuple[Suppression, tuple[int, int]]]]


def _match(
    diagnostics: Sequence[Diagnostic], by_file: _Regions
) -> tuple[list[Diagnostic], list[Diagnostic], dict[Suppression, set[str]]]:
    used: dict[Suppression, set[str]] = {}
    kept, suppressed = [], []
    for diagnostic in diagnostics:
        hit = _suppressing(diagnostic, by_file)
        if hit is None:
            kept.append(diagnostic)
        else:
            suppressed.append(diagnostic)
            used.setdefault(hit, set()).add(diagnostic.code)
    return kept, suppressed, used


def _covers_code(suppression: Suppression, code: str) -> bool:
    return not suppression.codes or code in suppression.codes


def _suppressing(diagnostic: Diagnostic, by_file: _Regions) -> Suppression | None:
    """The directive credited with silencing ``diagnostic``: one on an anchor's own line
    first, then the one covering the least code, so the answer does not depend on whether
    statement extents were computed."""
    best = None
    for span in _anchors(diagnostic):
        first = span.line
        last = span.end_line or span.line
        for suppression, (start, end) in by_file.get(_key(span.path), ()):
            if _covers_code(suppression, diagnostic.code) and first <= end and start <= last:
                rank = (not first <= suppression.line <= last, end - start, suppression.line, suppression.col)
                if best is None or rank < best[0]:
                    best = (rank, suppression)
    return best[1] if best else None


def _anchors(diagnostic: Diagnostic) -> list[Span]:
    """Where a directive may sit: the underline, the origin, the return, the ``def`` line."""
    spans = [diagnostic.span, diagnostic.origin.span if diagnostic.origin else None, diagnostic.return_span]
    function = diagnostic.function
    if function is not None and function.path and function.line:
        spans.append(Span(function.path, function.line))
    return [span for span in spans if span is not None and span.path]


def _key(path: str) -> str:
    return os.path.normcase(os.path.abspath(path))


class _StatementExtents:
    """Line ranges of statements, compound headers and whole functions, from libcst positions."""

    def __init__(
        self,
        simple: list[tuple[int, int]],
        compound: list[tuple[int, int, int, bool]],
        starts: list[int],
        lines: list[str],
    ):
        self.simple = simple
        """(first, last) line of each simple statement line."""
        self.compound = compound
        """(first line incl. decorators, last header line, last line, is a function or class)."""
        self.starts = sorted(set(starts))
        self.lines = lines

    @classmethod
    def of(cls, source: str) -> _StatementExtents:
        import libcst as cst

        from offload_fixer.source.metadata import node_positions

        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError:
            return cls([], [], [], [])
        positions = node_positions(module)
        simple: list[tuple[int, int]] = []
        compound: list[tuple[int, int, int, bool]] = []
        starts: list[int] = []
        for node, where in positions.items():
            if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                simple.append((where.start.line, where.end.line))
                if isinstance(node, cst.SimpleStatementLine):
                    starts.append(where.start.line)
            elif isinstance(node, cst.BaseCompoundStatement):
                first = _first_line(node, positions)
                whole = isinstance(node, (cst.FunctionDef, cst.ClassDef))
                compound.append((first, _header_end(node, positions), where.end.line, whole))
                starts.append(first)
        return cls(simple, compound, starts, source.splitlines())

    def region(self, suppression: Suppression) -> tuple[int, int]:
        line = suppression.line
        found = self._region_at(line)
        if found is not None:
            return found
        if suppression.standalone:
            below = next((start for start in self.starts if start > line), None)
            between = self.lines[line : (below or 0) - 1]
            if below is not None and all(text.lstrip().startswith("#") for text in between):
                return self._region_at(below) or (below, below)
        return line, line

    def _region_at(self, line: int) -> tuple[int, int] | None:
        inside = [(first, last) for first, last in self.simple if first <= line <= last]
        if inside:
            return min(inside, key=lambda extent: extent[1] - extent[0])
        headers = [c for c in self.compound if c[0] <= line <= c[1]]
        if headers:
            first, header_end, last, whole = min(headers, key=lambda c: c[1] - c[0])
            return (first, last) if whole else (first, header_end)
        return None


def _first_line(node, positions) -> int:
    """A statement's first line, decorators included (libcst starts a ``def`` at ``def``)."""
    decorators = getattr(node, "decorators", ())
    return positions[decorators[0] if decorators else node].start.line


def _header_end(node, positions) -> int:
    """Last line of a compound statement's header: the line of its colon."""
    import libcst as cst

    if isinstance(node, cst.Match):
        first = node.cases[0]
    elif isinstance(node.body, cst.SimpleStatementSuite):
        return positions[node.body].start.line
    else:
        first = node.body.body[0]
    return _first_line(first, positions) - len(first.leading_lines) - 1
