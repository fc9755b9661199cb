"""Which top-level statements of a new version of a document must be analysed again.

An editor changes one statement at a time, yet every version used to be analysed whole: every
jit site discovered and every jitted function run again. The findings of a top-level
statement (its jit sites' findings) depend on its own text and, through the module-level
names it reads, on the statements that bind them, and so on transitively. A
:class:`~offload_fixer.static.outline.SourceCache` gives an unchanged statement the same
libcst node in every version, so the findings of a statement are kept, by that node, with
the nodes of the statements binding the names it reads; the next version re-analyses a
statement only when that list changed (its text, a binder's text, a binder added, removed
or moved across it) or when a statement it reads from is re-analysed itself.

A document is read statement by statement, as a check without a cache reads a file: of the
statements a version must analyse again, only those a host value can reach
(:func:`~offload_fixer.static.candidates.site_candidates`) are searched for jit sites, and
libcst parses only what those read; the others find nothing. There a statement is known by
the key of its chunk of text instead of a node (it may never be parsed), and the project
modules read to rule statements out count as read. Opening a 20,000-line file so parses a
handful of statements instead of all of them (``benchmarks/lsp_latency.py``).

Reads and bindings are over-approximated from ``ast``: every name a statement loads,
in any scope (and every attribute name, for ``module.name`` reached through an import of the
file itself), is a read; the names it stores or deletes outside its functions and classes,
its ``def``s, classes and imports, the base name of an attribute or item it assigns there,
and any name declared ``global`` or bound by a walrus are bindings; a star import binds
everything. A new version with other ``global`` declarations, another target or JAX
version, or a project module changed on disk since, is analysed whole. From scratch or not,
statements are searched and their sites analysed in file order, so the findings are the
same as a whole analysis's (``tests/static/test_incremental.py``).
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .names import import_binding

_STAR = "*"


@dataclass(frozen=True)
class StatementNames:
    """The module-level names one top-level statement may bind, and the names it may read."""

    binds: frozenset[str]
    reads: frozenset[str]


def statement_names(statements: Sequence[ast.stmt]) -> StatementNames:
    binds: set[str] = set()
    reads: set[str] = set()
    stack: list[tuple[ast.AST, bool]] = []
    for statement in statements:
        if type(statement) is ast.ClassDef:  # its members one by one: most are the last version's
            binds.add(statement.name)
            for field in _child_fields(ast.ClassDef):
                if field != "body":
                    child = getattr(statement, field, None)
                    items = child if type(child) is list else [child]
                    stack.extend((item, True) for item in items if isinstance(item, ast.AST))
            for member in statement.body:
                known = _MEMBER_NAMES.get(member)
                if known is None:
                    known = _MEMBER_NAMES[member] = _names([(member, True)], set(), set())
                binds |= known[0]
                reads |= known[1]
        else:
            stack.append((statement, False))
    _names(stack, binds, reads)
    binds.discard("")
    return StatementNames(frozenset(binds), frozenset(reads))


_MEMBER_NAMES: weakref.WeakKeyDictionary[ast.stmt, tuple[frozenset[str], frozenset[str]]] = weakref.WeakKeyDictionary()
"""What each statement of a class body binds and reads, by its node: a document's outline keeps
the members an edit left alone (:mod:`.class_members`)."""


def _names(
    stack: list[tuple[ast.AST, bool]], binds: set[str], reads: set[str]
) -> tuple[frozenset[str], frozenset[str]]:
    """Walks ``stack`` (nodes, and whether they are inside a def, class or lambda), adding
    to ``binds`` and ``reads``; returns them."""
    while stack:
        node, nested = stack.pop()
        if type(node) is ast.Name:  # the most common node by far, and a leaf: decided first
            if type(node.ctx) is ast.Load:
                reads.add(node.id)
            elif not nested:
                binds.add(node.id)
            continue
        if type(node) is ast.Attribute:
            reads.add(node.attr)
            if not nested and type(node.ctx) is not ast.Load:
                binds.add(_base_name(node))
        elif isinstance(node, ast.Subscript) and not nested and not isinstance(node.ctx, ast.Load):
            binds.add(_base_name(node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not nested:
            binds.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and not nested:
            for alias in node.names:
                binds.add(import_binding(node, alias)[0])
        elif isinstance(node, ast.Global):
            binds.update(node.names)
            reads.update(node.names)
        elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            binds.add(node.target.id)  # a walrus binds in the enclosing function, or the module
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name and not nested:
            binds.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest and not nested:
            binds.add(node.rest)
        # Names bound inside a def, class or lambda are its own (a ``global`` aside).
        inner = nested or isinstance(node, _SCOPES)
        for field in _child_fields(type(node)):
            child = getattr(node, field, None)
            if type(child) is list:
                stack.extend((item, inner) for item in child if isinstance(item, ast.AST))
            elif isinstance(child, ast.AST):
                stack.append((child, inner))
    return frozenset(binds), frozenset(reads)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_LEAF_FIELDS = frozenset({"ctx", "op", "ops"})
"""Fields that hold only ``Load``/``Store``/``Del`` or an operator: nodes with nothing to read."""
_CHILD_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {}


def _child_fields(kind: type[ast.AST]) -> tuple[str, ...]:
    """The fields of a node type that may hold nodes: ``ast.iter_child_nodes`` without its two
    generators per node, which cost more than half of this walk (it runs over every top-level
    statement when a document is opened)."""
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = _CHILD_FIELDS[kind] = tuple(name for name in kind._fields if name not in _LEAF_FIELDS)
    return fields


def _base_name(node: ast.expr) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


@dataclass
class KeptAnalysis:
    """What the last analysis of a document found, per top-level statement node."""

    context: tuple
    """Path, target, JAX rules and ``global`` declarations it was made under."""
    statements: dict[Any, tuple[Any, tuple, list]]
    """key of a statement -> (what stands for it; the keys of the statements it depended on,
    in file order, itself included; its findings). For a module parsed whole, the key is the id
    of the statement's libcst node (ids compare and hash fast, a libcst node hashes in Python,
    and cannot be reused: every node they name is held here). For one read statement by
    statement, the key of its chunk's text, and its libcst chunk where it was parsed (the
    nodes its findings name are there)."""
    foreign: dict[str, tuple[Any, Any]]
    """Project modules read, by path: (stamp, the scope read)."""
    reanalysed: tuple[int, ...] = ()
    """The indices of the statements this version analysed again (for tests and benchmarks)."""


class Increment:
    """The plan for one version: which statements to analyse, and the findings kept for the others."""

    def __init__(
        self,
        body: Sequence[Any],
        names: Sequence[StatementNames],
        kept: KeptAnalysis | None,
        context: tuple,
        stamp: Callable[[str], Any],
        ids: Sequence[Any] | None = None,
    ) -> None:
        """``ids``: the key of each statement (default: the id of each of ``body``'s nodes)."""
        binders: dict[str, list[int]] = {}
        stars: list[int] = []
        for index, found in enumerate(names):
            for name in found.binds:
                if name == _STAR:
                    stars.append(index)
                else:
                    binders.setdefault(name, []).append(index)
        readers: list[list[int]] = [[] for _ in body]
        self.keys: list[tuple] = []
        ids = [id(node) for node in body] if ids is None else list(ids)
        for index, found in enumerate(names):
            depends = {index, *stars}
            for name in found.reads & binders.keys():
                depends.update(binders[name])
            ordered = sorted(depends)
            for other in ordered:
                if other != index:
                    readers[other].append(index)
            self.keys.append(tuple(map(ids.__getitem__, ordered)))
        usable = (
            kept is not None
            and kept.context == context
            and all(stamp(path) == recorded for path, (recorded, _) in kept.foreign.items())
        )
        self.kept = kept if usable else None
        statements = self.kept.statements if self.kept is not None else {}
        keys = self.keys
        changed = [
            index
            for index, node_id in enumerate(ids)
            if (entry := statements.get(node_id)) is None or entry[1] != keys[index]
        ]
        dirty = set(changed)
        while changed:
            for reader in readers[changed.pop()]:
                if reader not in dirty:
                    dirty.add(reader)
                    changed.append(reader)
        self.body = body
        self.ids = ids
        self.context = context
        self.dirty = sorted(dirty)

    def findings(self, fresh: dict[int, list]) -> list:
        """All findings in file order: ``fresh`` (by statement index) for the analysed ones."""
        statements = self.kept.statements if self.kept is not None else {}
        return [
            f
            for index, node_id in enumerate(self.ids)
            for f in (fresh[index] if index in fresh else statements.get(node_id, (None, (), []))[2])
        ]

    def kept_node(self, index: int) -> Any:
        """What the last version held for the statement at ``index`` (None: nothing)."""
        statements = self.kept.statements if self.kept is not None else {}
        entry = statements.get(self.ids[index])
        return None if entry is None else entry[0]

    def keep(
        self, fresh: dict[int, list], foreign: dict[str, tuple[Any, Any]], body: Sequence[Any] | None = None
    ) -> KeptAnalysis:
        """What the next version starts from (``body``: what stands for each statement now,
        when not what it was planned with). The project modules read stay recorded while
        their stamps hold, also those read only for statements kept from earlier versions."""
        statements = self.kept.statements if self.kept is not None else {}
        recorded = dict(self.kept.foreign) if self.kept is not None else {}
        recorded.update(foreign)
        return KeptAnalysis(
            self.context,
            {
                node_id: (node, self.keys[index], fresh[index] if index in fresh else statements[node_id][2])
                for index, (node_id, node) in enumerate(zip(self.ids, self.body if body is None else body))
            },
            recorded,
            tuple(sorted(fresh)),
        )
