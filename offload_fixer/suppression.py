"""``# offload-fixer: ignore[OFL1200]`` comments (and ruff's ``# noqa: OFL1200``): which
diagnostics they silence, which are unused.

A directive silences the diagnostics whose location, origin or return statement falls in
the code it is attached to:

* a comment on any line of a statement, multi-line ones included, covers that statement;
* a comment on a decorator or on the ``def`` line of a function covers the whole function;
* a comment on the header of another compound statement (``with``, ``for``...) covers the
  header;
* a comment alone on its line covers the statement right below it.

ruff's spellings are honoured as ruff 0.17 honours them, with offload-fixer's codes in them
(ruff accepts them there once ``lint.external`` names ``OFL``; other tools' codes in them are
theirs):

* ``# noqa: OFL1200`` and a bare ``# noqa`` silence the findings that point at their own line
  (the underline, the origin, the return or the ``def``), never a whole statement;
* ``# ruff: ignore[OFL1200]`` at the end of a line does the same; alone on its line, it covers
  the next line of code;
* ``# ruff: disable[OFL1200]`` ... ``# ruff: enable[OFL1200]`` covers the lines between (an
  unmatched ``disable``, to the end of its block; either unmatched comment is a warning);
* ``# ruff: file-ignore[OFL1200]``, anywhere, covers the file.

``# offload-fixer: disable[...]``, ``enable[...]`` and ``file-ignore[...]`` are the same in
offload-fixer's own name. An unused code is reported like an unused directive; a bare
``# noqa`` is anyone's, so it never is.

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
RUFF_MARKER = "ruff:"
_RANGE = re.compile(
    r"#\s*(?P<tool>ruff|offload-fixer)\s*:\s*(?P<kind>ignore|disable|enable|file-ignore)\s*\[(?P<codes>[^\]]*)\]"
)
"""ruff's ``# ruff: ignore[...]``, ``disable[...]``, ``enable[...]`` and ``file-ignore[...]`` (codes
required, the keyword in lower case, as ruff reads them), and the same in offload-fixer's name
(its own ``ignore`` is :data:`_DIRECTIVE`'s: a whole statement)."""
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
    kind: str = "statement"
    """``statement`` (``offload-fixer: ignore``), ``noqa``, ``line`` (``ruff: ignore``),
    ``disable``, ``enable`` or ``file`` (``file-ignore``)."""


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
        if self.reason == "unmatched disable":
            return f"`disable[{', '.join(self.codes)}]` without a matching `enable`: it covers the rest of its block"
        if self.reason == "unmatched enable":
            return f"`enable[{', '.join(self.codes)}]` without a matching `disable` before it"
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
    if not _may_hold_directives(source):
        return []
    if not chunks:
        return [Suppression(path, *found) for found in _directives(source)]
    result: list[Suppression] = []
    line = 0
    for start, end in chunks:
        text = source[start:end]
        if _may_hold_directives(text):
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


def _may_hold_directives(text: str) -> bool:
    return MARKER in text or RUFF_MARKER in text or "noqa" in text.lower()


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
                found.append((line, col + match.start() + 1, ours, False, True, "noqa"))
            for match in _RANGE.finditer(token.string):
                if match.group("tool") == MARKER and match.group("kind") == "ignore":
                    continue  # offload-fixer's own ignore: the statement's (_DIRECTIVE)
                codes = _split_codes(match.group("codes"))
                ours = tuple(code for code in codes if code.startswith(CODE_PREFIX))
                if match.group("tool") == "ruff" and not ours:  # ruff's own codes: ruff's
                    continue
                line, col = token.start
                standalone = not lines[line - 1][:col].strip()
                kind = {"ignore": "line", "file-ignore": "file"}.get(match.group("kind"), match.group("kind"))
                found.append((line, col + match.start() + 1, ours or codes, standalone, False, kind))
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
    unmatched: list[UnusedSuppression] = []
    for path, source in sources.items():
        found = find_suppressions(path, source, (chunks or {}).get(path))
        if found:
            regions, unpaired = _line_regions(found, source)
            by_file[_key(path)] = regions
            unmatched += unpaired
    kept, suppressed, used = _match(diagnostics, by_file)
    widen = {
        _key(span.path)
        for diagnostic in kept
        for span in _anchors(diagnostic)
        if any(s.kind == "statement" and _covers_code(s, diagnostic.code) for s, _ in by_file.get(_key(span.path), ()))
    }
    if widen:
        for key in widen:
            extents = _StatementExtents.of(texts[key])
            by_file[key] = [(s, extents.region(s) if s.kind == "statement" else region) for s, region in by_file[key]]
        kept, suppressed, used = _match(diagnostics, by_file)

    unused = list(unmatched)
    for entries in by_file.values():
        for suppression, _ in entries:
            if suppression.kind == "enable":  # it silences nothing itself: only where a block ends
                continue
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


def _line_regions(
    found: Sequence[Suppression], source: str
) -> tuple[list[tuple[Suppression, tuple[int, int]]], list[UnusedSuppression]]:
    """Each directive with the lines it covers before statements are known (a statement's
    ``ignore``: its own line, widened later), and a warning for each ``disable`` or ``enable``
    that has no partner: ``ruff: ignore`` its line, or alone on its line the next line of code;
    ``disable[C]`` the lines up to the next ``enable[C]`` (unmatched: to the end of its block);
    ``file-ignore`` the file."""
    lines = source.splitlines()
    regions: list[tuple[Suppression, tuple[int, int]]] = []
    unmatched: list[UnusedSuppression] = []
    closing: dict[Suppression, set[str]] = {}
    for suppression in found:
        line = suppression.line
        if suppression.kind == "line" and suppression.standalone:
            below = next((n for n in range(line + 1, len(lines) + 1) if _is_code(lines[n - 1])), line)
            regions.append((suppression, (below, below)))
        elif suppression.kind == "file":
            regions.append((suppression, (1, max(len(lines), 1))))
        elif suppression.kind == "disable":
            end, codes = _block_end(suppression, found, lines)
            if codes:
                unmatched.append(_unused(suppression, codes, "unmatched disable"))
            regions.append((suppression, (line, end)))
        else:
            regions.append((suppression, (line, line)))
        if suppression.kind == "disable":
            for other in found:
                if other.kind == "enable" and other.line > line:
                    closing.setdefault(other, set()).update(suppression.codes)
    for suppression in found:
        if suppression.kind == "enable":
            opened = closing.get(suppression, set())
            stray = tuple(code for code in suppression.codes if code not in opened)
            if stray:
                unmatched.append(_unused(suppression, stray, "unmatched enable"))
    return regions, unmatched


def _block_end(disable: Suppression, found: Sequence[Suppression], lines: list[str]) -> tuple[int, tuple[str, ...]]:
    """The last line a ``disable`` covers: the next ``enable`` of its codes, else the end of the
    block it is written in (the last line before code indented less than the comment); and the
    codes no ``enable`` closes."""
    enables = [s for s in found if s.kind == "enable" and s.line > disable.line]
    ends = [next((s.line for s in enables if code in s.codes), None) for code in disable.codes]
    open_codes = tuple(code for code, end in zip(disable.codes, ends) if end is None)
    if not open_codes:
        return max(end for end in ends if end is not None), ()
    indent = len(lines[disable.line - 1]) - len(lines[disable.line - 1].lstrip())
    end = len(lines)
    for number in range(disable.line + 1, len(lines) + 1):
        text = lines[number - 1]
        if _is_code(text) and len(text) - len(text.lstrip()) < indent:
            end = number - 1
            break
    return end, open_codes


def _is_code(text: str) -> bool:
    stripped = text.strip()
    return bool(stripped) and not stripped.startswith("#")


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
            if suppression.kind == "enable":  # only ends a block
                continue
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
