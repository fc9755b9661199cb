"""A fixed line longer than the project's limit, wrapped as ``ruff format`` wraps it.

Only lines a fix made (not in the text it started from) are touched, one logical line at a
time: a one-line statement, or an argument or element on its own line inside brackets the
user already broke, or a decorator. Each pair of brackets is a group, laid out as ruff's printer lays out
groups: in the order they are written, a group stays on the line when it fits there together
with what follows it up to the next group's opening bracket (or the line's end, its comment
included); else it breaks: its contents go on one line of their own, one indentation deeper,
when they fit there, or else one item a line with a trailing comma (a single item is laid out
the same way, inside); a tuple, list, set or dict of several items always goes one item a
line. An unparenthesized tuple a statement assigns or returns is put in
parentheses to break; an arithmetic one whose last operand has brackets breaks in those. What
ruff would break at its operators (in parentheses it adds), a lambda, a comprehension: left as
written. Whitespace is libcst's: the nodes' own whitespace fields, never text.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import libcst as cst
from libcst.metadata import CodeRange, PositionProvider

from offload_fixer.code_style import CodeStyle
from offload_fixer.source.decoding import split_lines
from offload_fixer.source.metadata import MetadataWrapper

Mode = Literal["flat", "hug", "explode"]
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


@dataclass
class _Group:
    node: cst.CSTNode
    items: list[list[_Piece]]
    item_texts: list[str]
    needs_comma: bool = False
    """A one-element tuple: its comma stays."""
    adds_parentheses: bool = False
    clauses: bool = False
    """A comprehension's element and clauses: apart on a line, one a line broken, no commas."""

    @property
    def inner(self) -> int:
        if self.clauses:
            return len(" ".join(self.item_texts))
        return len(", ".join(self.item_texts)) + (1 if self.needs_comma else 0)

    @property
    def flat(self) -> int:
        return self.inner + (0 if self.adds_parentheses else 2)


_Piece = str | _Group


@dataclass
class _Layout:
    limit: int
    step: int
    modes: dict[cst.CSTNode, tuple[Mode, int, int]] = field(default_factory=dict)
    """Group node -> (mode, its items' column, its closing bracket's column)."""


def wrap_long_lines(original: str, fixed: cst.Module, style: CodeStyle) -> cst.Module:
    """``fixed`` with each line a fix made longer than ``style.line_length`` wrapped; the same
    module where there is none (or none it can wrap)."""
    old, new = split_lines(original), split_lines(fixed.code)
    made: set[int] = set()
    for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            made.update(n + 1 for n in range(j1, j2) if len(new[n].rstrip("\r\n").expandtabs(8)) > style.line_length)
    if not made:
        return fixed
    wrapper = MetadataWrapper(fixed, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    indent = fixed.default_indent
    layout = _Layout(style.line_length, len(indent) if indent.strip() == "" and indent else 4)
    owners = _statement_columns(fixed, positions)
    for line in sorted(made):
        unit = _unit_on(line, positions, new[line - 1])
        if unit is None:
            continue
        node, value, start = unit
        tail = len(new[line - 1].rstrip("\r\n")) - positions[value].end.column
        block = owners.get(line, 0)
        _lay(_pieces_of(fixed, value, top=True), start + _head(fixed, node), tail, start, block, layout)
    if not layout.modes:
        return fixed
    return fixed.visit(_Apply(layout, owners, positions))


def _statement_columns(module: cst.Module, positions: Mapping[cst.CSTNode, CodeRange]) -> dict[int, int]:
    """Each line's block indentation (the column of the statement that holds it): what libcst
    writes before a line inside brackets (``ParenthesizedWhitespace(indent=True)``)."""
    columns: dict[int, int] = {}
    for node, where in positions.items():
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            for line in range(where.start.line, where.end.line + 1):
                columns[line] = where.start.column  # inner statements come later in the walk, and win
    return columns


def _unit_on(
    line: int, positions: Mapping[cst.CSTNode, CodeRange], text: str
) -> tuple[cst.CSTNode, cst.BaseExpression, int] | None:
    """The logical line starting ``line``'s text and ending on it: (node, its expression, column)."""
    start = len(text) - len(text.lstrip())
    best: tuple[cst.CSTNode, cst.BaseExpression, int] | None = None
    for node, where in positions.items():
        if where.start.line != line or where.end.line != line or where.start.column != start:
            continue
        value = _value_of(node)
        if value is not None and (best is None or positions[best[0]].end.column < where.end.column):
            best = (node, value, start)
    return best


def _value_of(node: cst.CSTNode) -> cst.BaseExpression | None:
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1:
        small = node.body[0]
        if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return, cst.Expr)):
            return small.value
    if isinstance(node, (cst.Arg, cst.Element, cst.StarredElement, cst.DictElement, cst.StarredDictElement)):
        return node.value
    if isinstance(node, cst.Decorator):
        return node.decorator
    return None


def _head(module: cst.Module, node: cst.CSTNode) -> int:
    """Columns before the unit's expression on its line (``mu, nu = ``, ``return ``, ``key=``)."""
    value = _value_of(node)
    assert value is not None
    if isinstance(node, cst.Decorator):
        return 1 + len(node.whitespace_after_at.value)
    code = module.code_for_node(node.body[0] if isinstance(node, cst.SimpleStatementLine) else node)
    return code.index(module.code_for_node(value)) if module.code_for_node(value) in code else 0


def _pieces_of(module: cst.Module, expr: cst.BaseExpression, top: bool = False) -> list[_Piece]:
    """``expr`` as text and groups, in the order they are written."""
    code = module.code_for_node
    if "\n" in code(expr):
        return [code(expr)]
    if isinstance(expr, cst.Tuple):  # unparenthesized: a statement's value, in parentheses to break
        if expr.lpar:
            return [_group(module, expr)]
        return [_group(module, expr, adds_parentheses=True)] if top and expr.elements else [code(expr)]
    if expr.lpar:
        return [code(expr)]
    if isinstance(expr, cst.Call):
        return [*_pieces_of(module, expr.func), _group(module, expr)]
    if isinstance(expr, cst.Subscript):
        return [*_pieces_of(module, expr.value), _group(module, expr)]
    if isinstance(expr, cst.Attribute):
        return [*_pieces_of(module, expr.value), code(expr.dot) + expr.attr.value]
    if isinstance(expr, (cst.List, cst.Set, cst.Dict)):
        return [_group(module, expr)]
    if isinstance(expr, _COMPREHENSIONS) and (expr.lpar or not isinstance(expr, cst.GeneratorExp)):
        return [_comprehension(module, expr)]
    if isinstance(expr, cst.BinaryOperation) and top:
        operands = _operands(module, expr)
        if isinstance(operands[-1], _Group):  # ruff leaves out the parentheses it would add
            return operands
    return [code(expr)]


def _operands(module: cst.Module, expr: cst.BaseExpression) -> list[_Piece]:
    """An operation's operands and operators as pieces (``0.5 * jnp.sum(...)``)."""
    if isinstance(expr, cst.BinaryOperation) and not expr.lpar:
        return [
            *_operands(module, expr.left),
            module.code_for_node(expr.operator),
            *_operands(module, expr.right),
        ]
    return _pieces_of(module, expr)


def _group(module: cst.Module, node: cst.CSTNode, adds_parentheses: bool = False) -> _Group:
    items = _items(node)
    texts = [module.code_for_node(item.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip() for item in items]
    pieces = [_item_pieces(module, item) for item in items]
    one_tuple = isinstance(node, cst.Tuple) and len(items) == 1
    return _Group(node, pieces, texts, needs_comma=one_tuple, adds_parentheses=adds_parentheses)


def _comprehension(module: cst.Module, node: cst.BaseComp) -> _Group:
    """``[elt for x in xs if c]`` as a group of its element and its clauses."""
    code = module.code_for_node
    if isinstance(node, cst.DictComp):
        pieces: list[list[_Piece]] = [[code(node.key) + ": ", *_pieces_of(module, node.value)]]
    else:
        assert isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp))
        pieces = [_pieces_of(module, node.elt)]
    texts = [_text(pieces[0])]
    clause: cst.CompFor | None = node.for_in
    while clause is not None:
        head = f"{'async ' if clause.asynchronous else ''}for {code(clause.target)} in "
        pieces.append([head, *_pieces_of(module, clause.iter)])
        texts.append(code(clause.with_changes(ifs=(), inner_for_in=None, whitespace_before=cst.SimpleWhitespace(""))))
        for condition in clause.ifs:
            pieces.append(["if ", *_pieces_of(module, condition.test)])
            texts.append(code(condition.with_changes(whitespace_before=cst.SimpleWhitespace(""))))
        clause = clause.inner_for_in
    return _Group(node, pieces, texts, clauses=True)


def _text(pieces: Sequence[_Piece]) -> str:
    return "".join(p if isinstance(p, str) else "…" * p.flat for p in pieces)


def _items(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    if isinstance(node, cst.Call):
        return node.args
    if isinstance(node, cst.Subscript):
        return node.slice
    assert isinstance(node, (cst.Tuple, cst.List, cst.Set, cst.Dict))
    return node.elements


def _item_pieces(module: cst.Module, item: cst.CSTNode) -> list[_Piece]:
    code = module.code_for_node
    if isinstance(item, cst.Arg):
        head = code(item.with_changes(value=cst.Name("_"), comma=cst.MaybeSentinel.DEFAULT)).strip()[:-1]
        return [head, *_pieces_of(module, item.value)] if head else _pieces_of(module, item.value)
    if isinstance(item, (cst.Element, cst.StarredElement)):
        return (["*"] if isinstance(item, cst.StarredElement) else []) + _pieces_of(module, item.value)
    if isinstance(item, cst.DictElement):
        return [code(item.key) + ": ", *_pieces_of(module, item.value)]
    if isinstance(item, cst.StarredDictElement):
        return ["**", *_pieces_of(module, item.value)]
    assert isinstance(item, cst.SubscriptElement)
    if isinstance(item.slice, cst.Index):
        return _pieces_of(module, item.slice.value)
    return [code(item.slice)]


def _width(pieces: Sequence[_Piece]) -> int:
    return sum(len(p) if isinstance(p, str) else p.flat for p in pieces)


def _lay(pieces: list[_Piece], column: int, tail: int, line: int, block: int, layout: _Layout) -> None:
    """Decide each group of ``pieces`` written from ``column`` on a line indented ``line``,
    with ``tail`` columns after them on the line they end on."""
    for index, piece in enumerate(pieces):
        if isinstance(piece, str):
            column += len(piece)
            continue
        rest = 0
        for after in pieces[index + 1 :]:
            if isinstance(after, str):
                rest += len(after)
            else:
                rest += 1
                break
        else:
            rest += tail
        if column + piece.flat + rest <= layout.limit or not piece.items:
            column += piece.flat
            continue
        inner = line + layout.step
        collection = isinstance(piece.node, (cst.Tuple, cst.List, cst.Set, cst.Dict)) and len(piece.items) > 1
        if inner + piece.inner <= layout.limit and not piece.needs_comma and not collection:
            layout.modes[piece.node] = ("hug", inner, line)
        elif len(piece.items) == 1 and not piece.needs_comma:
            layout.modes[piece.node] = ("hug", inner, line)
            _lay(piece.items[0], inner, 0, inner, block, layout)
        else:
            layout.modes[piece.node] = ("explode", inner, line)
            for item in piece.items:
                _lay(item, inner, 0 if piece.clauses else 1, inner, block, layout)
        column = line + 1


class _Apply(cst.CSTTransformer):
    """Writes the decided breaks into the groups' whitespace."""

    def __init__(self, layout: _Layout, blocks: Mapping[int, int], positions: Mapping[cst.CSTNode, CodeRange]) -> None:
        super().__init__()
        self.layout = layout
        self.blocks = blocks
        self.positions = positions

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        decided = self.layout.modes.get(original_node)
        if decided is None:
            return updated_node
        mode, inner, outer = decided
        block = self.blocks.get(self.positions[original_node].start.line, 0)
        into, back = _newline(inner - block), _newline(outer - block)
        if isinstance(updated_node, _COMPREHENSIONS):
            return _broken_comprehension(updated_node, into, back, mode == "explode")
        items = list(_items(updated_node))
        last = len(items) - 1
        laid: list[cst.CSTNode] = []
        for index, item in enumerate(items):
            if index < last:
                comma = item.comma if isinstance(item.comma, cst.Comma) else cst.Comma()  # type: ignore[attr-defined]
                after = into if mode == "explode" else cst.SimpleWhitespace(" ")
                laid.append(item.with_changes(comma=comma.with_changes(whitespace_after=after)))
            elif mode == "explode":
                laid.append(item.with_changes(comma=cst.Comma(whitespace_after=back)))
            else:
                laid.append(item.with_changes(comma=cst.MaybeSentinel.DEFAULT))
        closing = cst.SimpleWhitespace("") if mode == "explode" else back
        return _rebracket(updated_node, laid, into, closing)


def _broken_comprehension(
    node: cst.BaseComp, into: cst.ParenthesizedWhitespace, back: cst.ParenthesizedWhitespace, apart: bool
) -> cst.CSTNode:
    """Its element on a line of its own, and each clause on one of its own too when ``apart``."""

    def clauses(clause: cst.CompFor) -> cst.CompFor:
        before = into if apart else cst.SimpleWhitespace(" ")
        ifs = [condition.with_changes(whitespace_before=before) for condition in clause.ifs]
        inner = clauses(clause.inner_for_in) if clause.inner_for_in is not None else None
        return clause.with_changes(whitespace_before=before, ifs=ifs, inner_for_in=inner)

    node = node.with_changes(for_in=clauses(node.for_in))
    if isinstance(node, cst.ListComp):
        return node.with_changes(
            lbracket=node.lbracket.with_changes(whitespace_after=into),
            rbracket=node.rbracket.with_changes(whitespace_before=back),
        )
    if isinstance(node, (cst.SetComp, cst.DictComp)):
        return node.with_changes(
            lbrace=node.lbrace.with_changes(whitespace_after=into),
            rbrace=node.rbrace.with_changes(whitespace_before=back),
        )
    assert isinstance(node, cst.GeneratorExp)
    return node.with_changes(
        lpar=[*node.lpar[:-1], node.lpar[-1].with_changes(whitespace_after=into)],
        rpar=[node.rpar[0].with_changes(whitespace_before=back), *node.rpar[1:]],
    )


def _newline(indent: int) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(last_line=cst.SimpleWhitespace(" " * max(indent, 0)))


def _rebracket(
    node: cst.CSTNode,
    items: list[cst.CSTNode],
    opening: cst.ParenthesizedWhitespace,
    closing: cst.BaseParenthesizableWhitespace,
) -> cst.CSTNode:
    if isinstance(node, cst.Call):
        if isinstance(items[-1], cst.Arg):
            items[-1] = items[-1].with_changes(whitespace_after_arg=closing)
        return node.with_changes(args=items, whitespace_before_args=opening)
    if isinstance(node, cst.Subscript):
        return node.with_changes(
            slice=items,
            lbracket=node.lbracket.with_changes(whitespace_after=opening),
            rbracket=node.rbracket.with_changes(whitespace_before=closing),
        )
    if isinstance(node, cst.Tuple):
        lpar = node.lpar or [cst.LeftParen()]
        rpar = node.rpar or [cst.RightParen()]
        return node.with_changes(
            elements=items,
            lpar=[*lpar[:-1], lpar[-1].with_changes(whitespace_after=opening)],
            rpar=[rpar[0].with_changes(whitespace_before=closing), *rpar[1:]],
        )
    if isinstance(node, cst.List):
        return node.with_changes(
            elements=items,
            lbracket=node.lbracket.with_changes(whitespace_after=opening),
            rbracket=node.rbracket.with_changes(whitespace_before=closing),
        )
    assert isinstance(node, (cst.Set, cst.Dict))
    return node.with_changes(
        elements=items,
        lbrace=node.lbrace.with_changes(whitespace_after=opening),
        rbrace=node.rbrace.with_changes(whitespace_before=closing),
    )
