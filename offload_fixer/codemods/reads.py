"""Where a function reads a name, and which part of the pytree each read takes.

``opt_state["mu"]["w"].astype(f32)`` reads ``opt_state`` at the path ``['mu']['w']`` (then
calls a method of that leaf); ``opt_state`` passed whole reads it at ``()``. The moves to
device that a streamed argument or an offloaded value needs are made at these reads, so only
the sub-trees that need it move, next to the code that uses them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst

from offload_fixer.codemods.sharding_exprs import moved_value, string_value
from offload_fixer.model import PathKey

METADATA_ATTRIBUTES = frozenset({"shape", "dtype", "ndim", "size", "sharding", "aval", "weak_type"})
"""Attributes of an array that read no data: no move needed for them."""


@dataclass(frozen=True)
class Read:
    node: cst.BaseExpression
    """The outermost subscript/attribute chain on the name (or the name itself)."""
    path: tuple[PathKey, ...]
    move: cst.Call | None
    """The move to device whose first argument the chain already is."""

    @property
    def moved(self) -> bool:
        return self.move is not None

    def at(self, path: tuple[PathKey, ...]) -> cst.BaseExpression:
        """The part of the chain that reads ``path`` (a prefix of the read's own)."""
        node = self.node
        for _ in range(len(self.path) - len(path)):
            node = node.value  # type: ignore[attr-defined]
        return node


@dataclass
class Reads:
    reads: list[Read]
    rebound: list[cst.CSTNode]
    """Statements (anywhere in the function) that assign the name again."""


def reads_of(name: str, body: cst.CSTNode, is_device_move: Callable[[cst.Call], bool]) -> Reads:
    """Every read of ``name`` under ``body``, skipping nested scopes that bind it themselves;
    ``is_device_move`` tells a ``device_put`` to device memory (it resolves names)."""
    finder = _Finder(name, is_device_move)
    body.visit(finder)
    return Reads(finder.reads, finder.rebound)


def chain_path(expr: cst.BaseExpression, name: str) -> tuple[PathKey, ...] | None:
    """The pytree path ``expr`` reads from ``name`` when it is a chain of literal subscripts and
    attributes on it; None otherwise."""
    keys: list[PathKey] = []
    while True:
        if isinstance(expr, cst.Name):
            return tuple(reversed(keys)) if expr.value == name else None
        if isinstance(expr, cst.Attribute):
            keys.append(("attr", expr.attr.value))
            expr = expr.value
            continue
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
            key = expr.slice[0].slice.value
            if isinstance(key, cst.Integer):
                keys.append(("index", int(key.evaluated_value)))
            elif string_value(key) is not None:
                keys.append(("key", string_value(key)))
            else:
                return None
            expr = expr.value
            continue
        return None


def leaf_part(path: Sequence[PathKey], leaves: Sequence[tuple[PathKey, ...]]) -> tuple[PathKey, ...] | None:
    """How much of a read's ``path`` must move for the host ``leaves``: the path itself when it
    covers some of them, the leaf when it reads into one (``["w"][0]``, ``.astype``), None when
    it touches none of them or reads only an array's metadata (``.shape``). An attribute that
    is no pytree field of the leaves (``.items()``) reads the whole sub-tree before it."""
    taken: list[PathKey] = []
    for key in path:
        candidate = (*taken, key)
        if key[0] == "attr" and not any(leaf[: len(candidate)] == candidate for leaf in leaves):
            if key[1] in METADATA_ATTRIBUTES:
                return None
            break
        taken.append(key)
    read = tuple(taken)
    for leaf in leaves:
        if read[: len(leaf)] == leaf:
            return leaf
    if any(leaf[: len(read)] == read for leaf in leaves):
        return read
    return None


class _Finder(cst.CSTVisitor):
    def __init__(self, name: str, is_device_move: Callable[[cst.Call], bool]) -> None:
        super().__init__()
        self.name = name
        self.is_device_move = is_device_move
        self.reads: list[Read] = []
        self.rebound: list[cst.CSTNode] = []
        self._moves: dict[int, cst.Call] = {}

    def _shadows(self, params: cst.Parameters) -> bool:
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        every += [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
        return any(p.name.value == self.name for p in every)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return not self._shadows(node.params)

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return not self._shadows(node.params)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> bool:
        for target in node.targets:
            self._target(node, target.target)
        node.value.visit(self)
        return False

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        self._target(node, node.target)
        node.target.visit(self)  # ``x += 1`` reads x too
        node.value.visit(self)
        return False

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        self._target(node, node.target)
        if node.value is not None:
            node.value.visit(self)
        return False

    def visit_For(self, node: cst.For) -> bool:
        self._target(node, node.target)
        node.iter.visit(self)
        node.body.visit(self)
        if node.orelse is not None:
            node.orelse.visit(self)
        return False

    def _target(self, statement: cst.CSTNode, target: cst.BaseExpression) -> None:
        """A name assigned is no read; ``x[...] = v`` reads and changes x."""
        if isinstance(target, cst.Name):
            if target.value == self.name:
                self.rebound.append(statement)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._target(statement, element.value)
        elif isinstance(target, cst.StarredElement):
            self._target(statement, target.value)
        else:
            root = target
            while isinstance(root, (cst.Subscript, cst.Attribute)):
                root = root.value
            if isinstance(root, cst.Name) and root.value == self.name:
                self.rebound.append(statement)
            target.visit(self)

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # not the keyword's name
        return False

    def visit_Call(self, node: cst.Call) -> None:
        if self.is_device_move(node):
            moved = moved_value(node)
            if moved is not None:
                self._moves[id(moved)] = node

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return self._chain(node)

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        return self._chain(node)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.reads.append(Read(node, (), self._moves.get(id(node))))

    def _chain(self, node: cst.BaseExpression) -> bool:
        path = chain_path(node, self.name)
        if path is None:
            if isinstance(node, cst.Attribute):
                node.value.visit(self)  # ``x.attr``: the attribute's name is no read
                return False
            return True
        self.reads.append(Read(node, path, self._moves.get(id(node))))
        return False
