"""A large class statement parsed by libcst a few methods at a time, into the tree a parse of
the whole statement gives.

libcst's native parser holds about 280 bytes for each character of the text it parses until
it returns: a class of 86 kB (maxtext's ``MaxEngine``) took 25 MB more of a worker's memory
than anything else in its check. A chunk of the check (:mod:`.source`) is one top-level
statement, so such a class was parsed in one piece. Here its body is cut between statements,
into pieces of about :data:`PIECE_CHARS` characters, each parsed under a stand-in header
(``class _:``, ended as the text's first line is; the body keeps its own indentation); their statements and the last piece's
trailing lines are put back into the class the first piece parsed. Statements do not depend
on the header above them, so the tree is the one a whole parse gives (every large class of
jax, flax, optax, axlearn and maxtext compares equal, node for node).

A cut is made only where the lines between two statements are blank, or comments no deeper
than the statements: a comment indented further after a method belongs to that method's
block, which only a parse of both sees. The cuts are found from the class's ``ast``, the
outline's where the caller has it.

Each piece's module is kept (:class:`Part`): a document's next version of the class
takes the pieces an edit did not touch from the last one, and the positions of a node are
resolved in the one piece that holds it. In JAX's ``tests/memories_test.py`` an edit to
one method of a 1,000-line class parses one piece of about 4 kB, not the class.
"""

from __future__ import annotations

import ast
import itertools
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import libcst as cst

from offload_fixer.source import type_parameters
from offload_fixer.source.lines import NEWLINE, first_line
from offload_fixer.source.metadata import node_positions

from .cst_nodes import function_ranges, walk_nodes
from .outline import SourceCache

SPLIT_CHARS = 8192
"""A class statement at least this long is parsed in pieces."""
PIECE_CHARS = 4096
"""About how much of the class body each piece holds (it ends at the next cut after this)."""


class PiecedClass(NamedTuple):
    """A class statement parsed piece by piece: the module of the whole text, and for each
    piece (in the order ``parse_piece`` parsed them) what to add to a line number of its module
    to make it the text's (0 for the first piece; a later piece's module starts with the
    stand-in header)."""

    module: cst.Module
    shifts: list[int]


def parse_class_in_pieces(
    text: str,
    parse_piece: Callable[[str], cst.Module] = cst.parse_module,
    shape: tuple[ast.ClassDef, int] | None = None,
) -> PiecedClass | None:
    """The module of ``text``, one class statement (its comment lines above it and a file's
    header included), parsed piece by piece (each by ``parse_piece``, which may give the
    module of an earlier parse of the same text: every piece's statements are taken as they
    are); None where it is not one class, is too short to cut, or does not parse (the caller
    parses it whole, and reports what that finds). ``shape``: the class's ``ast`` where the
    caller has it, and the line its numbers give the text's line before the first (some of
    its methods may be blank lines of the text, :mod:`.pruning`); else ``text`` is parsed."""
    if len(text) < SPLIT_CHARS:
        return None
    if shape is None:
        try:
            tree = type_parameters.parse(text, newer_syntax=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if len(tree.body) != 1 or not isinstance(tree.body[0], ast.ClassDef):
            return None
        shape = (tree.body[0], 0)
    starts = [0, *(match.end() for match in NEWLINE.finditer(text))]
    bounds = _piece_lines(*shape, text, starts)
    if len(bounds) < 2:
        return None

    def piece(first: int, after: int | None) -> str:
        return text[starts[first - 1] : len(text) if after is None else starts[after - 1]]

    try:
        module = parse_piece(piece(*bounds[0]))
        block = class_block(module)
        if block is None:
            return None
        body, footer, last = list(block.body), block.footer, module
        shifts = [0]
        stand_in_header = "class _:" + module.default_newline  # ended as the text's first line is
        for first, after in bounds[1:]:
            part = parse_piece(stand_in_header + piece(first, after))
            stand_in = class_block(part)
            if part.header or stand_in is None:
                return None
            body.extend(stand_in.body)
            footer, last = stand_in.footer, part
            shifts.append(first - 2)
    except cst.ParserSyntaxError:
        return None
    (statement,) = module.body
    whole = block.with_changes(body=body, footer=footer)
    return PiecedClass(
        module.with_changes(
            body=[statement.with_changes(body=whole)],
            footer=last.footer,
            has_trailing_newline=last.has_trailing_newline,
        ),
        shifts,
    )


def class_block(module: cst.Module) -> cst.IndentedBlock | None:
    """The body of the one class statement of a parsed piece."""
    if len(module.body) != 1:
        return None
    (statement,) = module.body
    if not isinstance(statement, cst.ClassDef) or not isinstance(statement.body, cst.IndentedBlock):
        return None
    return statement.body


def _piece_lines(cls: ast.ClassDef, shift: int, text: str, starts: list[int]) -> list[tuple[int, int | None]]:
    """(first line, line after) of each piece, 1-based; the last piece runs to the text's end.
    ``shift``: what to take from the ``ast``'s line numbers to make them the text's. A
    statement whose first line is blank in the text is not there (a pruned method); where a
    statement's first line does not start at the body's indentation, nothing is cut."""
    groups: list[list[int]] = []  # the body's statements by line, those sharing one together
    indent = None
    for statement in cls.body:
        first = first_line(statement) - shift
        last = (statement.end_lineno or statement.lineno) - shift
        if not 1 <= first <= last <= len(starts):
            return []
        if groups and first <= groups[-1][1]:  # on a line of the statement before
            groups[-1][1] = max(groups[-1][1], last)
            continue
        line = text[starts[first - 1] : starts[first] if first < len(starts) else len(text)]
        code = line.lstrip(" \t")
        if not code.strip():
            continue
        if indent is None:
            indent = statement.col_offset
        if len(line) - len(code) != indent or statement.col_offset != indent:
            return []
        groups.append([first, last])
    if not groups or indent is None or groups[0][0] <= cls.lineno - shift:
        return []  # a body on the header's line
    bounds: list[tuple[int, int | None]] = []
    start = 1
    for (_, last), (first, _) in itertools.pairwise(groups):
        between = (text[starts[line] : starts[line + 1]] for line in range(last, first - 1))
        if not all(_may_cut_at(line, indent) for line in between):
            continue
        if starts[last] - starts[start - 1] >= PIECE_CHARS:
            bounds.append((start, last + 1))
            start = last + 1
    bounds.append((start, None))
    return bounds


def _may_cut_at(line: str, indent: int) -> bool:
    """A line between two statements that the next one owns in a whole parse too."""
    stripped = line.lstrip(" \t")
    return not stripped.strip() or (stripped.startswith("#") and len(line) - len(stripped) <= indent)


class Part:
    """One piece of a class parsed alone: its module, the class body's
    statements it holds, and, resolved when a diagnostic names one of its nodes, their ids and
    positions in that module. A document's cache keeps it for the next version of the class."""

    def __init__(self, text: str, module: cst.Module) -> None:
        self.text = text
        self.module = module
        block = class_block(module)
        self.statements: tuple = tuple(block.body) if block is not None else ()
        self.owner: weakref.ref[Any] | None = None
        """The chunk assembled from it: no other chunk in use may hold its nodes."""
        self.memo: dict[tuple, Any] = {}
        """What a visitor found in its statements (:func:`.policies.visit_chunk`), kept with them."""
        self._ids: frozenset | None = None
        self._positions: dict | None = None
        self._functions: list | None = None

    def holds(self, node: Any) -> bool:
        if self._ids is None:
            self._ids = frozenset(map(id, walk_nodes(self.statements)))
        return id(node) in self._ids

    def positions(self) -> dict:
        if self._positions is None:
            self._positions = dict(node_positions(self.module))
        return self._positions

    def functions(self) -> list:
        if self._functions is None:
            self._functions = function_ranges(self.statements, self.positions())
        return self._functions


def piece_module(text: str, cache: SourceCache | None, taken: list[Part]) -> cst.Module:
    """The module of one piece of a class: the one an earlier version of the document parsed,
    where no chunk in use in this check holds it (and this class has not taken it already),
    else parsed now. A part is taken from the chunk that held it, which no longer owns its
    parts (:meth:`.source.Chunk.owns_its_parts`): where that chunk is found in the cache again, it is
    parsed again."""
    part = cache.parts.get(text) if cache is not None and cache.on_demand else None
    if part is not None:
        owner = part.owner() if part.owner is not None else None
        if (owner is not None and id(owner) in cache.in_use) or any(p is part for p in taken):  # type: ignore[union-attr]
            part = None
    if part is None:
        part = Part(text, cst.parse_module(text))
    taken.append(part)
    return part.module
