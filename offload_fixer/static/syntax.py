"""Fast walks over libcst expressions and the small syntactic facts the interpreter reads.

Nothing here evaluates: these are questions about the syntax alone (the calls in a
statement, the names an expression reads, the parts of an index), asked for every statement
of every file that passes the prefilter, so they are written for speed.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from typing import Any

import libcst as cst

from offload_fixer.source.bindings import BindingCollector

from .cst_nodes import is_layout

_EMPTY_MODULE = cst.Module(body=())
_NOT_READ = frozenset({"star", "star_arg", "star_kwarg", "annotation", "returns"})
"""Fields besides layout that hold nothing an expression reads: a ``*`` marker, the ``*args``
and ``**kwargs`` parameters (which have no default), types."""
_NEW_SCOPES = (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.FunctionDef, cst.ClassDef)
_FIELDS: dict[type, tuple] = {}


def condition_key(test: Any) -> tuple[str, bool]:
    """A flag test as text and polarity, ``not`` stripped: two tests with the same key are the
    same flag."""
    holds = True
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, holds = test.expression, not holds
    return _EMPTY_MODULE.code_for_node(test), holds


def names_in(node: Any) -> Iterator[str]:
    """Names read in an expression (not attribute names), outside nested scopes."""
    stack = [node]
    while stack:
        current = stack.pop()
        if type(current) is cst.Name:
            yield current.value
            continue
        if type(current) is cst.Attribute:
            stack.append(current.value)
            continue
        for name in _fields(type(current)):
            child = getattr(current, name)
            if type(child) in (tuple, list):
                stack.extend(item for item in child if _SAME_SCOPE_NODE[type(item)])
            elif _SAME_SCOPE_NODE[type(child)]:
                stack.append(child)


def bound_names(statements: list) -> set[str]:
    """Every name the statements bind or declare (``global``/``nonlocal``)."""
    collector = BindingCollector().collect(statements)
    return set(collector.bindings) | collector.declared


def index_parts(node: cst.Subscript) -> Iterator[Any]:
    """The expressions of an index: each element, or each bound of a slice."""
    for element in node.slice:
        part = element.slice
        if isinstance(part, cst.Index):
            yield part.value
        elif isinstance(part, cst.Slice):
            for bound in (part.lower, part.upper, part.step):
                if bound is not None:
                    yield bound


def whole_axis(part: Any) -> bool:
    """``:`` or ``...`` in an index: selects everything along the axis."""
    if isinstance(part, cst.Slice):
        return part.lower is None and part.upper is None and part.step is None
    return isinstance(part.value, cst.Ellipsis)


def header_expressions(statement: Any) -> list:
    """Expressions of a compound statement's header (``if test:``, ``for x in it:``, ``with e:``)."""
    if isinstance(statement, (cst.If, cst.While)):
        return [statement.test]
    if isinstance(statement, cst.For):
        return [statement.iter]
    if isinstance(statement, cst.With):
        return [item.item for item in statement.items]
    return []


def _fields(cls: type[cst.CSTNode]) -> tuple:
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = tuple(name for name in cls.__dataclass_fields__ if not is_layout(name) and name not in _NOT_READ)
        _FIELDS[cls] = fields
    return fields


def calls_in(node: Any) -> Iterator[cst.Call]:
    """Every call in an expression or simple statement, outside nested scopes.

    A hand-written walk: libcst's generic ``children`` is about ten times slower, and this
    runs over every statement of every file that passes the prefilter. Children are told
    apart by exact type (:data:`_SAME_SCOPE_NODE`): ``isinstance`` against libcst's abstract
    classes goes through ``ABCMeta`` and cost more than half of the walk.
    """
    stack = [node]
    while stack:
        current = stack.pop()
        if type(current) is cst.Call:
            yield current
        for name in _fields(type(current)):
            child = getattr(current, name)
            kind = type(child)
            if kind is tuple or kind is list:
                for item in child:
                    if _SAME_SCOPE_NODE[type(item)]:
                        stack.append(item)
            elif _SAME_SCOPE_NODE[kind]:
                stack.append(child)


class _SameScopeNode(dict):
    """type -> whether it is a libcst node that does not open a scope, filled on first use."""

    def __missing__(self, kind: type) -> bool:
        found = self[kind] = issubclass(kind, cst.CSTNode) and not issubclass(kind, _NEW_SCOPES)
        return found


_SAME_SCOPE_NODE = _SameScopeNode()


@functools.lru_cache(maxsize=4096)
def literal_value(text: str) -> Any:
    """``evaluated_value`` of a number or string literal (``ast.literal_eval`` of its text,
    which compiles it: literals repeat, so the values are kept)."""
    return ast.literal_eval(text)


def sets_parameter_attributes(function: Any) -> bool:
    """Whether a ``def`` (or lambda) may change an object passed to it: an assignment or
    ``del`` whose target is reached through a parameter (``self.x = v``, ``arg.items[0] = v``,
    in nested functions too), or ``setattr``/``delattr``."""
    params = function.params
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}

    class Finder(cst.CSTVisitor):
        found = False

        def _target(self, target: Any) -> None:
            for part in _target_parts(target):
                reached = False
                while isinstance(part, (cst.Attribute, cst.Subscript)):
                    part, reached = part.value, True
                self.found = self.found or (reached and isinstance(part, cst.Name) and part.value in names)

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            self._target(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            self._target(node.target)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            self._target(node.target)

        def visit_Del(self, node: cst.Del) -> None:
            self._target(node.target)

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value in ("setattr", "delattr"):
                self.found = True

    finder = Finder()
    function.body.visit(finder)
    return finder.found


def _target_parts(target: Any) -> Iterator[Any]:
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_parts(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_parts(target.value)
    else:
        yield target
