"""Where the top-level statements of a text are, found with stdlib ``ast`` (about ten
times faster than libcst), and the cache an editor keeps per document.

The text is cut into chunks, one per top-level statement with the blank and comment lines
above it (statements sharing a line stay together; the first chunk also holds the file's
header, the last one its trailing lines). A chunk boundary is a line start with no bracket,
string or continuation open and the next code at column 0, so a chunk parses alone as it
does in the file, and what precedes a boundary cannot change how the text after it parses:
:mod:`.source` parses the chunks with libcst one by one, and :class:`SourceCache` keeps them
by text, so that a new version of a document re-parses only the chunks a change touched.
The outline itself is computed again only around the change, from the previous version's.

No libcst here: the prefilter runs on the outline before any file needs libcst.
"""

from __future__ import annotations

import ast
import bisect
from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, overload

from offload_fixer.source import type_parameters
from offload_fixer.source.lines import NEWLINE, count_line_ends, first_line

from .class_members import class_after

if TYPE_CHECKING:
    from .incremental import KeptAnalysis


class SourceCache:
    """Parsed chunks of the texts seen lately, by chunk text: keep one per open document so
    that a new version of it re-parses only its changed chunks. Holds the chunks of the
    latest text and up to ``spare`` others (older versions of edited statements: an undo
    finds them), least recently used going first. The chunks are :mod:`.source`'s, which
    parses them (``source.cached_chunk``); they are opaque here, where no libcst is."""

    def __init__(self, spare: int = 1024, on_demand: bool = True) -> None:
        self.spare = spare
        self.on_demand = on_demand
        """Statements parsed with libcst only as the check reads them (:mod:`.candidates`), as
        a check without a cache does; False: every chunk is parsed (the check's whole path)."""
        self.names: dict[tuple, Any] = {}
        """The names each chunk of the latest text binds and reads (:mod:`.incremental`), by
        the chunk's key (its text, whether it starts the file, its occurrence)."""
        self.derived: dict[tuple, tuple[ast.stmt, Any]] = {}
        """What the check read of the ``ast`` of each chunk of the latest text (its
        ``statement_reads.Group``), by the chunk's key, with the first statement it was read
        from: the next version's outline holds the same statements for the chunks a change
        left alone."""
        self.parts: dict[str, Any] = {}
        """The pieces of large classes parsed lately, by text (``class_pieces.Part``): a new version of
        a class re-parses only the pieces a change touched. Each knows the chunk that holds it."""
        self.in_use: dict[int, Any] = {}
        """The chunks of classes in pieces that the current check reads or keeps, by id: no other
        chunk may take their parts."""
        self._chunks: OrderedDict[tuple, Any] = OrderedDict()
        self.outline: Outline | None = None
        """The latest text's, which the next version's is computed from."""
        self.parsed = 0
        """How many chunks were parsed (not found here), for tests and benchmarks."""
        self.analysis: KeptAnalysis | None = None
        """The findings of the latest text, per top-level statement (:mod:`.incremental`)."""

    def get(self, key: tuple) -> Any:
        """The chunk kept for ``key``, None when there is none."""
        found = self._chunks.get(key)
        if found is not None:
            self._chunks.move_to_end(key)
        return found

    def add(self, key: tuple, chunk: Any) -> None:
        """A chunk just parsed for ``key`` (None: the text did not parse alone, kept nowhere)."""
        self.parsed += 1
        if chunk is not None:
            self._chunks[key] = chunk

    def begin(self, current: Collection[tuple] | None = None) -> None:
        """A new check of the document, before it reads any chunk: only the chunks the last
        analysis kept are in use, of the statements whose keys are ``current`` (None: all)."""
        self.in_use = {}
        if self.analysis is not None:
            for key, (held, _, _) in self.analysis.statements.items():
                if current is None or key in current:
                    for chunk in held if isinstance(held, tuple) else ():
                        self.in_use[id(chunk)] = chunk

    def trim(self, in_use: int) -> None:
        while len(self._chunks) > in_use + self.spare:
            self._chunks.popitem(last=False)
        self.parts = {text: part for text, part in self.parts.items() if part.owner() is not None}

    def __len__(self) -> int:
        return len(self._chunks)


class Outline:
    """Where a text's top-level statements are: their ``ast`` nodes, grouped by chunk, and
    the chunks' character spans (None when they cannot be cut exactly)."""

    def __init__(
        self,
        text: str,
        groups: Sequence[list[ast.stmt]],
        spans: list[tuple[int, int]] | None,
        grammar: tuple[int, int] | None = None,
        file_lines: bool = True,
        newer_syntax: bool = False,
    ) -> None:
        self.text = text
        self.groups: Sequence[list[ast.stmt]] = groups
        self.spans = spans
        self.grammar = grammar
        """The ``feature_version`` it was parsed with (:func:`~offload_fixer.source.python_version.grammar_of`)."""
        self.newer_syntax = newer_syntax
        """Whether syntax newer than this interpreter's is read (:mod:`~offload_fixer.source.type_parameters`)."""
        self.file_lines = file_lines
        """Whether the statements' line numbers are the text's (False: some come from an
        earlier version's outline, :func:`_outline_after`)."""

    @property
    def compacted(self) -> bool:
        return isinstance(self.groups, _ChunkStatements)

    def compact(self) -> Outline:
        """This outline keeping no ``ast``: each chunk's statements are parsed again if asked
        for. A project's modules keep what the candidates read of them instead
        (:func:`~offload_fixer.static.statement_reads.keep_groups_only`): a run reads hundreds, and
        their whole trees were most of its memory (115 of 185 MB traced on maxtext)."""
        if self.spans is None or self.compacted or "barry_as_FLUFL" in self.text:
            return self
        statements = _ChunkStatements(self.text, self.spans, self.grammar, self.newer_syntax)
        return Outline(self.text, statements, self.spans, self.grammar, newer_syntax=self.newer_syntax)

    def release(self, keep: Collection[int] = ()) -> None:
        """Let go of the ``ast`` of every chunk but those in ``keep``, in place, so that every
        holder of this outline lets go of it: a released chunk's statements are parsed again if
        asked for, as a :meth:`compact` outline's are."""
        if self.spans is None or "barry_as_FLUFL" in self.text:
            return
        kept = {index: self.groups[index] for index in keep}
        if isinstance(self.groups, _ChunkStatements):
            self.groups.kept = kept
        else:
            self.groups = _ChunkStatements(self.text, self.spans, self.grammar, self.newer_syntax, kept)

    @property
    def tree(self) -> ast.Module:
        """The statements as one ``ast`` module (their line numbers are not the file's)."""
        return ast.Module(body=[statement for group in self.groups for statement in group], type_ignores=[])


class _ChunkStatements(Sequence[list[ast.stmt]]):
    """The statements of each chunk of a text, parsed alone (as a chunk does: :func:`_cut`)
    each time one is asked for, with the text's line numbers; those of the chunks in ``kept``
    are the ones given."""

    def __init__(
        self,
        text: str,
        spans: list[tuple[int, int]],
        grammar: tuple[int, int] | None,
        newer_syntax: bool,
        kept: dict[int, list[ast.stmt]] | None = None,
    ) -> None:
        self.text = text
        self.spans = spans
        self.grammar = grammar
        self.newer_syntax = newer_syntax
        self.kept = kept or {}
        self.first_lines: list[int] = []
        line = 0
        for start, end in spans:
            self.first_lines.append(line)
            line += count_line_ends(text, start, end)

    def __len__(self) -> int:
        return len(self.spans)

    @overload
    def __getitem__(self, index: int) -> list[ast.stmt]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[list[ast.stmt]]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        kept = self.kept.get(index)
        if kept is not None:
            return kept
        start, end = self.spans[index]
        tree = type_parameters.parse(self.text[start:end], self.grammar, self.newer_syntax)
        return ast.increment_lineno(tree, self.first_lines[index]).body


def outline(
    text: str,
    cache: SourceCache | None = None,
    grammar: tuple[int, int] | None = None,
    newer_syntax: bool = False,
) -> Outline:
    """The outline of ``text``; raises ``SyntaxError``/``ValueError`` as ``ast.parse`` does
    (``grammar``: with that ``feature_version``, so syntax newer than the file's target fails;
    ``newer_syntax``: libcst's grammar judges the file, so Python 3.12's type parameters are
    read under 3.11, :mod:`~offload_fixer.source.type_parameters`).

    With a cache that saw an earlier version of the document, only the chunks around what
    changed are parsed with ``ast`` again (:func:`_outline_after`).
    """
    if (
        cache is not None
        and cache.outline is not None
        and cache.outline.grammar == grammar
        and cache.outline.newer_syntax == newer_syntax
        and "barry_as_FLUFL" not in text
    ):
        found = _outline_after(cache.outline, text)
        if found is not None:
            cache.outline = found
            return found
    tree = type_parameters.parse(text, grammar, newer_syntax)
    cut = _cut(text, tree)
    if cut is None:
        return Outline(text, [list(tree.body)], None, grammar, newer_syntax=newer_syntax)
    groups, spans = cut
    found = Outline(text, groups, [*spans[:-1], (spans[-1][0], len(text))], grammar, newer_syntax=newer_syntax)
    if cache is not None:
        cache.outline = found
    return found


def _outline_after(previous: Outline, text: str) -> Outline | None:
    """The outline of ``text`` from an earlier version's: the chunks before and after the
    change are kept, the ones it touches (and their neighbours) are parsed alone.

    Exact because a chunk boundary is a line start with no bracket, string or continuation
    open and the next code at column 0: what comes before it cannot change how the text
    after it parses, and a region that parses alone between two boundaries parses the same
    in the file. A region whose last statement is followed by lines (which belong to the
    next chunk) takes in that chunk too; anything else unusual parses the whole text.
    """
    old = previous.text
    spans = previous.spans
    if spans is None:  # the cache holds only outlines cut into chunks
        return None
    same_start = _common_prefix(old, text)
    same_end = _common_suffix(old, text, min(len(old), len(text)) - same_start)
    starts = [start for start, _ in spans]
    # From the chunk before the change: a line typed at the end of a function is at the start
    # of the next chunk's text, and parses only with the function.
    first = bisect.bisect_right(starts, max(same_start - 1, 0)) - 1
    last = bisect.bisect_right(starts, min(len(old) - same_end, len(old) - 1)) - 1
    shift = len(text) - len(old)
    if first == last:  # inside one chunk: a large class's members the change left alone are kept
        begin, end = spans[first]
        changed = (same_start - begin, max(len(old) - same_end, same_start) - begin)
        updated = class_after(
            previous.groups[first],
            old[begin:end],
            text[begin : end + shift],
            changed,
            previous.grammar,
            previous.newer_syntax,
        )
        if updated is not None:
            return Outline(
                text,
                [*previous.groups[:first], updated, *previous.groups[first + 1 :]],
                [*spans[:first], (begin, end + shift), *((a + shift, b + shift) for a, b in spans[first + 1 :])],
                previous.grammar,
                file_lines=False,
                newer_syntax=previous.newer_syntax,
            )
    for until in (last, last + 1):
        if until >= len(spans):
            return None
        begin, end = spans[first][0], spans[until][1] + shift
        region = text[begin:end]
        try:
            tree = type_parameters.parse(region, previous.grammar, previous.newer_syntax)
        except (SyntaxError, ValueError):
            return None
        cut = _cut(region, tree)
        if cut is None:
            return None
        groups, region_spans = cut
        if region_spans[-1][1] == len(region) or until == len(spans) - 1:
            region_spans[-1] = (region_spans[-1][0], len(region))
            return Outline(
                text,
                [*previous.groups[:first], *groups, *previous.groups[until + 1 :]],
                [
                    *spans[:first],
                    *((begin + a, begin + b) for a, b in region_spans),
                    *((a + shift, b + shift) for a, b in spans[until + 1 :]),
                ],
                previous.grammar,
                file_lines=False,
                newer_syntax=previous.newer_syntax,
            )
    return None


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix (a binary search of string comparisons, in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: str, b: str, limit: int) -> int:
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle :] == b[len(b) - middle :]:
            low = middle
        else:
            high = middle - 1
    return low


def _cut(text: str, tree: ast.Module) -> tuple[list[list[ast.stmt]], list[tuple[int, int]]] | None:
    """The statements by chunk, and the chunks' character spans: the first starts the text,
    each ends after the last line of its statements (those sharing a line stay together)."""
    if not tree.body:
        return None
    line_starts = [0]
    line_starts.extend(match.end() for match in NEWLINE.finditer(text))
    groups: list[list[ast.stmt]] = []
    lines: list[list[int]] = []
    for statement in tree.body:
        first = first_line(statement)
        last = statement.end_lineno if statement.end_lineno is not None else statement.lineno
        if lines and first <= lines[-1][1]:
            lines[-1][1] = max(lines[-1][1], last)
            groups[-1].append(statement)
        else:
            lines.append([first, last])
            groups.append([statement])
    spans = []
    start = 0
    for first, last in lines:
        if last > len(line_starts):
            return None
        opening = line_starts[first - 1]
        if opening < len(text) and text[opening] in " \t\f":
            return None  # the lines do not match ast's: a statement starts at column 0
        end = line_starts[last] if last < len(line_starts) else len(text)
        if end < len(text) and text[end - (3 if text.startswith("\r\n", end - 2) else 2)] == "\\":
            return None  # a backslash joins the next line: no boundary here
        spans.append((start, end))
        start = end
    return groups, spans
