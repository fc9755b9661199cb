"""libcst trees of a text assembled from its chunks (see :mod:`.outline`), and the positions of
their nodes, resolved per chunk.

libcst parses a 2,000-line file in about 90 ms and resolves its positions in about 250 ms; the
language server checks a file again after every change, which touches one statement. So each
chunk is parsed alone (and kept in a :class:`SourceCache` by its text), the chunks' statements
are assembled into one ``cst.Module`` for the interpreter, and positions are resolved only for
the chunks that hold a node a diagnostic names, then moved down by the chunk's first line.

The assembled module prints back the text byte for byte, and every node has the position a
whole-file parse gives it (tests/static/test_source.py). One thing differs from a whole-file
parse: comment lines indented under the end of a block belong to the next statement's
``leading_lines`` instead of the block's ``footer`` (libcst decides that by looking past the
block, which a chunk cannot); no position and nothing the check reads depends on it.

When the text cannot be cut exactly (``ast`` rejects it, a backslash joins two statements, or
a chunk does not parse alone), the whole text is parsed, and its statements are located by
their printed lengths.
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any

import libcst as cst
from libcst.metadata import CodePosition, CodeRange

from offload_fixer.source.lines import count_line_ends
from offload_fixer.source.metadata import node_positions

from .class_pieces import Part, parse_class_in_pieces, piece_module
from .cst_nodes import function_ranges, walk_nodes
from .outline import NEWLINE, Outline, SourceCache

_DEFAULT_INDENT = " " * 4
_DEFAULT_NEWLINE = "\n"


class Chunk:
    """The statement(s) of one chunk of text, parsed alone, with what the assembly needs."""

    def __init__(
        self,
        statements: tuple,
        header: tuple,
        footer: tuple,
        has_trailing_newline: bool,
        default_indent: str,
        default_newline: str,
        own_indent: bool,
        own_newline: bool,
    ) -> None:
        self.statements = statements
        self.header = header
        """Lines above the statement when the chunk starts the file (else in its ``leading_lines``)."""
        self.footer = footer
        self.has_trailing_newline = has_trailing_newline
        self.default_indent = default_indent
        self.default_newline = default_newline
        self.own_indent = own_indent
        """An indented block here leaves ``indent=None`` for ``default_indent``."""
        self.own_newline = own_newline
        """A line end here leaves ``Newline(None)`` for ``default_newline``."""
        self.memo: dict = {}
        """What the check read from the statement's syntax alone: the interpreter's
        (``Interpreter(memos=)``), the offload policies' (:func:`.policies.visit_chunk`)."""
        self.lines: int | None = None
        """How many line ends the chunk's text holds (counted once, by :func:`_assemble`)."""
        self._positions: dict | None = None
        self._node_ids: frozenset | None = None
        self._functions: list | None = None
        self._variants: dict[tuple, Chunk] = {}
        self.parts: tuple[tuple[int, Part], ...] = ()
        """A class parsed in pieces (:mod:`.class_pieces`): each piece, with what to add to its
        line numbers to make them the chunk's. Positions are resolved per part."""
        self._outer_ids: frozenset | None = None

    @classmethod
    def parse(
        cls,
        text: str,
        starts_file: bool,
        cache: SourceCache | None = None,
        shape: tuple[ast.ClassDef, int] | None = None,
    ) -> Chunk | None:
        """The chunk parsed alone (a large class a few methods at a time, :mod:`.class_pieces`,
        cut where its ``shape`` says when given, taking from a document's ``cache`` the pieces
        an earlier version of the class had); None when it is not exactly one statement of Python."""
        taken: list[Part] = []
        pieced = parse_class_in_pieces(text, lambda piece: piece_module(piece, cache, taken), shape)
        try:
            module = pieced.module if pieced is not None else cst.parse_module(text)
        except cst.ParserSyntaxError:
            return None
        if len(module.body) != 1:
            return None
        (statement,) = module.body
        header = module.header
        if module.header and not starts_file:
            statement = statement.with_changes(leading_lines=(*module.header, *statement.leading_lines))
            header = ()
        chunk = cls(
            (statement,),
            tuple(header),
            tuple(module.footer),
            module.has_trailing_newline,
            module.default_indent,
            module.default_newline,
            _first_block(statement) is not None,
            NEWLINE.search(text) is not None,
        )
        if pieced is not None:
            chunk.parts = tuple(zip(pieced.shifts, taken))
            owner = weakref.ref(chunk)
            for part in taken:
                part.owner = owner
                if cache is not None:
                    cache.parts[part.text] = part
        return chunk

    def owns_its_parts(self) -> bool:
        """Whether every part of this chunk is still its own (a newer chunk may have taken one,
        :func:`.class_pieces.piece_module`)."""
        return all(part.owner is not None and part.owner() is self for _, part in self.parts)

    def laid_out(self, indent: str, newline: str) -> Chunk:
        """This chunk for a file whose default indentation or line end differs from its own:
        the same tree with those spelled out, so it prints the same inside that file."""
        indent_differs = self.own_indent and self.default_indent != indent
        newline_differs = self.own_newline and self.default_newline != newline
        if not indent_differs and not newline_differs:
            return self
        key = (indent, newline)
        variant = self._variants.get(key)
        if variant is None:
            layout = _ExplicitLayout(
                self.default_indent if indent_differs else None, self.default_newline if newline_differs else None
            )
            module = cst.Module(
                body=self.statements,
                header=self.header,
                default_indent=self.default_indent,
                default_newline=self.default_newline,
            ).visit(layout)
            variant = Chunk(
                tuple(module.body),
                tuple(module.header),
                self.footer,
                self.has_trailing_newline,
                self.default_indent,
                self.default_newline,
                False,
                False,
            )
            self._variants[key] = variant
        return variant

    def positions(self) -> dict:
        """Code ranges of every node, lines counted from the chunk's first line."""
        if self._positions is None:
            module = cst.Module(
                body=self.statements,
                header=self.header,
                default_indent=self.default_indent,
                default_newline=self.default_newline,
            )
            self._positions = dict(node_positions(module))
        return self._positions

    def holds(self, node: Any) -> bool:
        if self.parts:
            return self._part_of(node) is not None or id(node) in self._outer()
        if self._node_ids is None:
            self._node_ids = frozenset(map(id, walk_nodes(self.statements)))
        return id(node) in self._node_ids

    def position(self, node: Any) -> CodeRange:
        """Where ``node`` is, lines counted from the chunk's first line: in a class parsed in
        pieces, resolved in the one piece that holds it."""
        found = self._part_of(node)
        if found is None:
            return self.positions()[node]
        shift, part = found
        return _shifted(part.positions()[node], shift)

    def functions_around(self, node: Any) -> list:
        """``(range, name)`` of the ``def``s that may hold ``node``, chunk-relative: in a class
        parsed in pieces, those of the piece that holds it (a method is never cut)."""
        found = self._part_of(node)
        if found is None:
            return self.functions()
        shift, part = found
        return [(_shifted(code_range, shift), name) for code_range, name in part.functions()]

    def _part_of(self, node: Any) -> tuple[int, Part] | None:
        return next(((shift, part) for shift, part in self.parts if part.holds(node)), None)

    def _outer(self) -> frozenset:
        """The ids of the nodes no part holds: the class statement, its header and its body block."""
        if self._outer_ids is None:
            inner = {id(statement) for _, part in self.parts for statement in part.statements}
            self._outer_ids = frozenset(map(id, walk_nodes(self.statements, inner)))
        return self._outer_ids

    def functions(self) -> list:
        """``(range, name)`` of each ``def`` in the chunk, chunk-relative."""
        if self._functions is None:
            self._functions = function_ranges(self.statements, self.positions())
        return self._functions


class ParsedSource:
    """A module assembled from chunks, and the positions of its nodes, resolved on demand."""

    def __init__(self, module: cst.Module | None, pieces: Sequence[tuple[int, Chunk]] | None = None) -> None:
        """``module`` is None for a module known by its ``pieces`` alone (the statements of a
        project module parsed one by one)."""
        self._module = module
        self._kept = pieces is not None
        self._pieces = None if pieces is None else list(pieces)
        self._piece_of_statement: dict[int, int] | None = None
        self._last_piece = 0

    def memos(self) -> list[dict] | None:
        """The memo of each top-level statement's chunk, or None for a module parsed whole (whose
        statements are not kept beyond this check)."""
        return [chunk.memo for _, chunk in self.pieces] if self._kept else None

    @property
    def module(self) -> cst.Module:
        if self._module is None:
            raise LookupError("a source assembled from pieces has no whole module")
        return self._module

    @property
    def pieces(self) -> list[tuple[int, Chunk]]:
        """``(line offset, chunk)`` in file order; for a module parsed whole, one chunk per
        statement, located by the printed lengths of the statements above it."""
        if self._pieces is None:
            self._pieces = _statement_pieces(self.module)
        return self._pieces

    def code_range(self, node: Any) -> CodeRange:
        """Where a node is in the text; for any node but whitespace, punctuation, operators and
        comment lines."""
        offset, chunk = self.pieces[self._piece_index(node)]
        return _shifted(chunk.position(node), offset)

    def functions_around(self, node: Any) -> list[tuple[CodeRange, str]]:
        """``(range, name)`` of the ``def``s in the top-level statement that holds ``node``:
        the only ones whose range can contain it."""
        offset, chunk = self.pieces[self._piece_index(node)]
        return [(_shifted(r, offset), name) for r, name in chunk.functions_around(node)]

    def holds(self, node: Any) -> bool:
        try:
            self._piece_index(node)
        except LookupError:
            return False
        return True

    def _piece_index(self, node: Any) -> int:
        if self._piece_of_statement is None:
            self._piece_of_statement = {id(chunk.statements[0]): i for i, (_, chunk) in enumerate(self.pieces)}
        index = self._piece_of_statement.get(id(node))
        if index is None or self.pieces[index][1].statements[0] is not node:
            index = self._search(node)
        self._last_piece = index
        return index

    def _search(self, node: Any) -> int:
        # The nodes of one finding sit close together: look around the last one first.
        count = len(self.pieces)
        for step in range(2 * count):
            index = self._last_piece + (step + 1) // 2 * (1 if step % 2 else -1)
            if 0 <= index < count and self.pieces[index][1].holds(node):
                return index
        raise LookupError(f"{type(node).__name__} node is not in this module (or only in its layout)")


class Sources:
    """Positions of nodes in the checked file and in the project modules the check read for
    it (a jitted function or a sharding may live in another module): each node is found in
    the source that holds it, and reported with that file's path."""

    def __init__(
        self,
        primary: ParsedSource,
        path: str,
        others: Sequence[tuple[str, ParsedSource, str]] = (),
        sha256: str | None = None,
    ) -> None:
        """``others``: ``(path, parsed statements, sha256 of the file)`` of each other module."""
        self.path = path
        self._sources = [(path, primary, sha256), *others]
        self._found: dict[int, tuple[str, ParsedSource, str | None]] = {}

    def _locate(self, node: Any) -> tuple[str, ParsedSource, str | None]:
        found = self._found.get(id(node))
        if found is None:
            found = next((entry for entry in self._sources if entry[1].holds(node)), None)
            if found is None:
                raise LookupError(f"{type(node).__name__} node is in none of the sources read")
            self._found[id(node)] = found
        return found

    def code_range(self, node: Any) -> CodeRange:
        return self._locate(node)[1].code_range(node)

    def functions_around(self, node: Any) -> list[tuple[CodeRange, str]]:
        return self._locate(node)[1].functions_around(node)

    def path_of(self, node: Any) -> str:
        return self._locate(node)[0]

    def sha256_of(self, node: Any) -> str | None:
        return self._locate(node)[2]


def parse_source(text: str, found: Outline | None, cache: SourceCache | None = None) -> ParsedSource:
    """Parse ``text`` (whose outline is ``found``, or None when ``ast`` rejected it) chunk by
    chunk through ``cache`` (a private one when None); raises ``cst.ParserSyntaxError`` as
    ``cst.parse_module`` does."""
    if found is not None and found.spans is not None:
        assembled = _assemble(text, found.spans, cache if cache is not None else SourceCache(0))
        if assembled is not None:
            return assembled
    return ParsedSource(cst.parse_module(text))


def _statement_pieces(module: cst.Module) -> list[tuple[int, Chunk]]:
    pieces = []
    line = 0
    for index, statement in enumerate(module.body):
        header = tuple(module.header) if index == 0 else ()
        chunk = Chunk((statement,), header, (), True, module.default_indent, module.default_newline, False, False)
        pieces.append((line, chunk))
        code = "".join(module.code_for_node(node) for node in (*header, statement))
        line += count_line_ends(code)
    return pieces


def cached_chunk(
    cache: SourceCache,
    text: str,
    starts_file: bool,
    occurrence: Hashable,
    shape: tuple[ast.ClassDef, int] | None = None,
) -> Chunk | None:
    """The chunk of ``text`` parsed alone, from ``cache`` when it holds it (None: it does not
    parse alone). ``occurrence`` tells equal chunks of one file apart (a count, or what else
    the text was cut for): a node must not be in a module twice. ``shape``: the ``ast`` of
    the class statement it is, where the caller has it (:meth:`Chunk.parse`)."""
    key = (text, starts_file, occurrence)
    found: Chunk | None = cache.get(key)
    if found is None or not found.owns_its_parts():
        found = Chunk.parse(text, starts_file, cache, shape)
        cache.add(key, found)
    if found is not None and found.parts:
        cache.in_use[id(found)] = found
    return found


def _assemble(
    text: str, spans: list[tuple[int, int]], cache: SourceCache, replaced: Mapping[int, str] | None = None
) -> ParsedSource | None:
    parsed = []
    pieces = []
    line = 0
    seen: dict[str, int] = {}
    for index, (start, end) in enumerate(spans):
        piece = text[start:end] if replaced is None else replaced.get(index, text[start:end])
        occurrence = seen.get(piece, 0)
        seen[piece] = occurrence + 1
        chunk = cached_chunk(cache, piece, index == 0, occurrence)
        if chunk is None or (chunk.footer and index < len(spans) - 1):
            return None
        parsed.append(chunk)
        pieces.append(line)
        if chunk.lines is None:  # a chunk is kept by its text: its line ends are counted once
            chunk.lines = count_line_ends(piece)
        line += chunk.lines
    cache.trim(len(parsed))
    # The file's defaults are libcst's: its first indented block, its first line end.
    indent = next((c.default_indent for c in parsed if c.own_indent), _DEFAULT_INDENT)
    first_newline = NEWLINE.search(text)
    newline = first_newline.group() if first_newline else _DEFAULT_NEWLINE
    parsed = [chunk.laid_out(indent, newline) for chunk in parsed]
    module = cst.Module(
        body=tuple(chunk.statements[0] for chunk in parsed),
        header=parsed[0].header,
        footer=parsed[-1].footer,
        default_indent=indent,
        default_newline=newline,
        has_trailing_newline=parsed[-1].has_trailing_newline,
    )
    return ParsedSource(module, list(zip(pieces, parsed)))


class _ExplicitLayout(cst.CSTTransformer):
    """Spells out a chunk's own indentation and line end where libcst left the default."""

    def __init__(self, indent: str | None, newline: str | None) -> None:
        super().__init__()
        self.indent = indent
        self.newline = newline

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        if self.indent is not None and updated.indent is None:
            return updated.with_changes(indent=self.indent)
        return updated

    def leave_Newline(self, original: cst.Newline, updated: cst.Newline) -> cst.Newline:
        if self.newline is not None and updated.value is None:
            return updated.with_changes(value=self.newline)
        return updated


def _first_block(statement: Any) -> cst.IndentedBlock | None:
    """The first indented block of a statement, in text order (where libcst reads the indent)."""
    for block in _blocks(statement):
        if isinstance(block, cst.IndentedBlock):
            return block
    return None


def _blocks(statement: Any) -> Iterator[Any]:
    body = getattr(statement, "body", None)
    if isinstance(body, cst.BaseSuite):
        yield body
    for case in getattr(statement, "cases", ()):
        yield case.body
    for handler in getattr(statement, "handlers", ()):
        yield handler.body
    orelse = getattr(statement, "orelse", None)
    if isinstance(orelse, cst.If):
        yield from _blocks(orelse)
    elif orelse is not None:
        yield orelse.body
    finalbody = getattr(statement, "finalbody", None)
    if finalbody is not None:
        yield finalbody.body


def _shifted(code_range: CodeRange, lines: int) -> CodeRange:
    if not lines:
        return code_range
    start, end = code_range.start, code_range.end
    return CodeRange(CodePosition(start.line + lines, start.column), CodePosition(end.line + lines, end.column))


def assemble_chunks(
    text: str, spans: Sequence[tuple[int, int]], replaced: Mapping[int, str] | None = None
) -> ParsedSource | None:
    """Some chunks of ``text`` (spans from its outline, in order, the first one starting the
    file) as one module, each chunk parsed alone; None when one does not parse alone. The fix
    planner edits such an excerpt instead of the whole file. ``replaced``: by position in
    ``spans``, a text parsed instead of the chunk's (the same lines, some blanked:
    :mod:`.pruning`)."""
    return _assemble(text, list(spans), SourceCache(0), replaced)
