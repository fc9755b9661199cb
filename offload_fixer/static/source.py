"""Parsing by top-level statement, so that an editor re-parses only what a change touched.

libcst parses a 2,000-line file in about 90 ms and resolves its positions in about 250 ms, and
the language server checks the file again after every change, which touches one statement.
So the text is cut into chunks, one per top-level statement (with the blank and comment lines
above it; the first chunk also holds the file's header), each chunk is parsed on its own and
kept in a :class:`SourceCache` by its text, and the chunks' statements are assembled into one
``cst.Module`` for the interpreter. Positions are resolved per chunk, and only for the chunks
that hold a node a diagnostic names.

A chunk parses as it does inside the file: a top-level statement starts at column 0 of a line
with no bracket, string or block open (stdlib ``ast``, which the prefilter has run already,
gives the lines). The assembled module prints back the text byte for byte and every node has
the position a whole-file parse gives it. One thing differs from a whole-file parse: comment
lines indented under the end of a block belong to the next statement's ``leading_lines``
instead of the block's ``footer`` (libcst decides that by looking past the block, which a chunk
cannot); no position and nothing the check reads depends on it.

When the text cannot be cut exactly (``ast`` rejects it, or a chunk does not parse alone), the
whole text is parsed as before, and its statements are located by their printed lengths.
"""

from __future__ import annotations

import ast
import re
from collections import OrderedDict
from typing import Any, Iterator, Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

_NEWLINE = re.compile(r"\r\n?|\n")
"""Line ends as both ``ast`` (universal newlines) and libcst count them."""
_DEFAULT_INDENT = " " * 4
_DEFAULT_NEWLINE = "\n"
_LAYOUT_FIELDS = frozenset({
    "lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after_decorators", "header", "footer",
    "newline", "equal", "colon", "lbrace", "rbrace", "lbracket", "rbracket", "first_line", "empty_lines",
    "indent", "dot", "asynchronous", "operator",
})
"""Node fields (with ``whitespace*``) that hold only layout tokens: no node a diagnostic names."""


class Chunk:
    """The statement(s) of one chunk of text, parsed alone, with what the assembly needs."""

    def __init__(self, statements: tuple, header: tuple, footer: tuple, has_trailing_newline: bool,
                 default_indent: str, default_newline: str, own_indent: bool, own_newline: bool) -> None:
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
        self._positions: dict | None = None
        self._node_ids: frozenset | None = None
        self._functions: list | None = None
        self._variants: dict[tuple, Chunk] = {}

    @classmethod
    def parse(cls, text: str, starts_file: bool) -> "Chunk | None":
        """The chunk's one statement; None when the text is not exactly one statement."""
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError:
            return None
        if len(module.body) != 1:
            return None
        (statement,) = module.body
        header = module.header
        if module.header and not starts_file:
            statement = statement.with_changes(leading_lines=(*module.header, *statement.leading_lines))
            header = ()
        return cls((statement,), tuple(header), tuple(module.footer), module.has_trailing_newline,
                   module.default_indent, module.default_newline, _first_block(statement) is not None,
                   _NEWLINE.search(text) is not None)

    def laid_out(self, indent: str, newline: str) -> "Chunk":
        """This chunk for a file whose default indentation or line end differs from its own:
        the same tree with those spelled out, so it prints the same inside that file."""
        indent_differs = self.own_indent and self.default_indent != indent
        newline_differs = self.own_newline and self.default_newline != newline
        if not indent_differs and not newline_differs:
            return self
        key = (indent, newline)
        variant = self._variants.get(key)
        if variant is None:
            layout = _ExplicitLayout(self.default_indent if indent_differs else None,
                                     self.default_newline if newline_differs else None)
            module = cst.Module(body=self.statements, header=self.header, default_indent=self.default_indent,
                                default_newline=self.default_newline).visit(layout)
            variant = Chunk(tuple(module.body), tuple(module.header), self.footer, self.has_trailing_newline,
                            self.default_indent, self.default_newline, False, False)
            self._variants[key] = variant
        return variant

    def positions(self) -> dict:
        """Code ranges of every node, lines counted from the chunk's first line."""
        if self._positions is None:
            module = cst.Module(body=self.statements, header=self.header, default_indent=self.default_indent,
                                default_newline=self.default_newline)
            self._positions = dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))
        return self._positions

    def holds(self, node: Any) -> bool:
        if self._node_ids is None:
            self._node_ids = frozenset(map(id, _walk(self.statements)))
        return id(node) in self._node_ids

    def functions(self) -> list:
        """``(range, name)`` of each ``def`` in the chunk, chunk-relative."""
        if self._functions is None:
            positions = self.positions()
            self._functions = [(positions[node], node.name.value) for node in _walk(self.statements)
                               if isinstance(node, cst.FunctionDef)]
        return self._functions


class SourceCache:
    """Parsed chunks of the texts seen lately, by chunk text: keep one per open document so
    that a new version of it re-parses only its changed chunks. Holds the chunks of the
    latest text and up to ``spare`` others (older versions of edited statements: an undo
    finds them), least recently used going first."""

    def __init__(self, spare: int = 1024) -> None:
        self.spare = spare
        self._chunks: OrderedDict[tuple, Chunk] = OrderedDict()
        self.parsed = 0
        """How many chunks were parsed (not found here), for tests and benchmarks."""

    def chunk(self, text: str, starts_file: bool, occurrence: int) -> Chunk | None:
        # ``occurrence`` tells apart equal chunks of one file: a node must not be in a module twice.
        key = (text, starts_file, occurrence)
        found = self._chunks.get(key)
        if found is not None:
            self._chunks.move_to_end(key)
            return found
        found = Chunk.parse(text, starts_file)
        self.parsed += 1
        if found is not None:
            self._chunks[key] = found
        return found

    def trim(self, in_use: int) -> None:
        while len(self._chunks) > in_use + self.spare:
            self._chunks.popitem(last=False)

    def __len__(self) -> int:
        return len(self._chunks)


class ParsedSource:
    """A module assembled from chunks, and the positions of its nodes, resolved on demand."""

    def __init__(self, module: cst.Module, pieces: Sequence[tuple[int, Chunk]] | None = None) -> None:
        self.module = module
        self._pieces = None if pieces is None else list(pieces)
        self._piece_of_statement: dict[int, int] | None = None
        self._last_piece = 0

    @property
    def pieces(self) -> list[tuple[int, Chunk]]:
        """``(line offset, chunk)`` in file order; for a module parsed whole, one chunk per
        statement, located by the printed lengths of the statements above it."""
        if self._pieces is None:
            self._pieces = _statement_pieces(self.module)
        return self._pieces

    def code_range(self, node: Any) -> CodeRange:
        offset, chunk = self.pieces[self._piece_index(node)]
        return _shifted(chunk.positions()[node], offset)

    def functions_around(self, node: Any) -> list[tuple[CodeRange, str]]:
        """``(range, name)`` of the ``def``s in the top-level statement that holds ``node``:
        the only ones whose range can contain it."""
        offset, chunk = self.pieces[self._piece_index(node)]
        return [(_shifted(r, offset), name) for r, name in chunk.functions()]

    def _piece_index(self, node: Any) -> int:
        if self._piece_of_statement is None:
            self._piece_of_statement = {id(chunk.statements[0]): i for i, (_, chunk) in enumerate(self.pieces)}
        index = self._piece_of_statement.get(id(node))
        if index is not None and self.pieces[index][1].statements[0] is node:
            return index
        # Nodes a diagnostic names sit close together: start where the last one was found.
        count = len(self.pieces)
        for step in range(count):
            index = (self._last_piece + step) % count
            if self.pieces[index][1].holds(node):
                self._last_piece = index
                return index
        raise LookupError(f"{type(node).__name__} node is not in this module")


def parse_source(text: str, tree: ast.Module | None, cache: SourceCache | None = None) -> ParsedSource:
    """Parse ``text`` (whose ``ast`` is ``tree``, or None when ``ast`` rejected it) chunk by
    chunk through ``cache`` (a private one when None); raises ``cst.ParserSyntaxError`` as
    ``cst.parse_module`` does."""
    spans = _chunk_spans(text, tree) if tree is not None else None
    if spans is not None:
        assembled = _assemble(text, spans, cache if cache is not None else SourceCache(0))
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
        line += len(_NEWLINE.findall(code))
    return pieces


def _chunk_spans(text: str, tree: ast.Module) -> list[tuple[int, int]] | None:
    """Character spans of the chunks: each ends after the last line of its statement(s) (those
    sharing a line stay together) and the last one at the end of the text."""
    if not tree.body:
        return None
    line_starts = [0]
    line_starts.extend(match.end() for match in _NEWLINE.finditer(text))
    groups: list[list[int]] = []
    for statement in tree.body:
        decorators = getattr(statement, "decorator_list", ())
        first = min(statement.lineno, *(d.lineno for d in decorators)) if decorators else statement.lineno
        if groups and first <= groups[-1][1]:
            groups[-1][1] = max(groups[-1][1], statement.end_lineno)
        else:
            groups.append([first, statement.end_lineno])
    spans = []
    start = 0
    for first, last in groups:
        if last > len(line_starts):
            return None
        opening = line_starts[first - 1]
        if opening < len(text) and text[opening] in " \t\f":
            return None  # the lines do not match ast's: a statement starts at column 0
        end = line_starts[last] if last < len(line_starts) else len(text)
        spans.append((start, end))
        start = end
    spans[-1] = (spans[-1][0], len(text))
    return spans


def _assemble(text: str, spans: list[tuple[int, int]], cache: SourceCache) -> ParsedSource | None:
    parsed = []
    seen: dict[str, int] = {}
    for index, (start, end) in enumerate(spans):
        piece = text[start:end]
        occurrence = seen.get(piece, 0)
        seen[piece] = occurrence + 1
        chunk = cache.chunk(piece, index == 0, occurrence)
        if chunk is None or chunk.footer and index < len(spans) - 1:
            return None
        parsed.append(chunk)
    cache.trim(len(parsed))
    # The file's defaults are libcst's: its first indented block, its first line end.
    indent = next((c.default_indent for c in parsed if c.own_indent), _DEFAULT_INDENT)
    first_newline = _NEWLINE.search(text)
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
    pieces = []
    line = 0
    for (start, end), chunk in zip(spans, parsed):
        pieces.append((line, chunk))
        line += len(_NEWLINE.findall(text, start, end))
    return ParsedSource(module, pieces)


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


_NODE_FIELDS: dict[type, tuple] = {}


def _walk(nodes: Sequence[Any]) -> Iterator[Any]:
    """Every node under ``nodes`` but layout tokens. Checks types by exact class (libcst's
    ``isinstance`` goes through ``ABCMeta`` and would cost most of the walk)."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        fields = _NODE_FIELDS.get(type(node))
        if fields is None:
            fields = tuple(name for name in type(node).__dataclass_fields__
                           if name not in _LAYOUT_FIELDS and not name.startswith("whitespace"))
            _NODE_FIELDS[type(node)] = fields
        for name in fields:
            child = getattr(node, name)
            if type(child) in (tuple, list):
                stack.extend(item for item in child if _is_node(type(item)))
            elif _is_node(type(child)):
                stack.append(child)


_IS_NODE: dict[type, bool] = {}


def _is_node(kind: type) -> bool:
    found = _IS_NODE.get(kind)
    if found is None:
        found = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return found


def _shifted(code_range: CodeRange, lines: int) -> CodeRange:
    if not lines:
        return code_range
    start, end = code_range.start, code_range.end
    return CodeRange(CodePosition(start.line + lines, start.column), CodePosition(end.line + lines, end.column))
