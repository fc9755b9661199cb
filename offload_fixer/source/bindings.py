"""Which names a scope of libcst statements binds, and how: the one binding collector that the
static check (``offload_fixer.static.scopes``) and the codemods (``offload_fixer.codemods.source_facts``)
both read.

It looks at the statements of one scope (not into nested functions or classes), so a caller
collects only the scopes it needs, one at a time. That is why it is not libcst's
``ScopeProvider``/``QualifiedNameProvider``, which analyse the whole file at once (several times
the cost of parsing it). Imports are recorded with the qualified name they bind (``jnp`` ->
``jax.numpy``), which is all the name resolution both sides need.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import libcst as cst
from libcst.helpers import get_full_name_for_node

BindingKind = Literal["assign", "annotation", "def", "class", "import", "parameter", "other"]


@dataclass(frozen=True, eq=False)
class Binding:
    kind: BindingKind
    """``assign`` (``name = node``), ``annotation`` (``name: T``, no value), ``def``, ``class``,
    ``import`` (of ``qualname``), ``parameter`` (added by a caller), ``other`` (loops, ``with``,
    ``except``, tuple targets, augmented assignments, ``del``, ``:=``)."""
    node: Any
    """The value of an ``assign``, the ``def``/``class`` statement, else the binding statement."""
    site: cst.CSTNode
    """Where the binding is written: its small statement, ``for``/``with`` statement, ``except``
    clause, ``def``/``class`` or parameter (for its line)."""
    index: int
    """Index of the top-level statement of the scope that contains the binding."""
    nested: bool
    """Inside a compound statement (``if``/``for``/``with``/``try``) of the scope."""
    qualname: str = ""
    type_only: bool = False
    """Under ``if TYPE_CHECKING:``: the type checker sees it, the running program never does."""

    @property
    def value(self) -> cst.BaseExpression | None:
        """The right-hand side of a plain ``name = value``; None for any other binding."""
        return self.node if self.kind == "assign" else None


class BindingCollector:
    """Collects the bindings of one scope: its statements, not nested functions or classes."""

    def __init__(self) -> None:
        self.bindings: dict[str, list[Binding]] = {}
        self.declared: set[str] = set()
        """Names declared ``global``/``nonlocal``: assigned through another scope."""
        self.star_sources: list[tuple[int, str]] = []
        """(level, module) of each ``from <level dots><module> import *``, in order."""
        self._type_only = False

    def add(
        self, name: str, kind: BindingKind, node: Any, site: cst.CSTNode, index: int, nested: bool, qualname: str = ""
    ) -> None:
        binding = Binding(kind, node, site, index, nested, qualname, self._type_only)
        self.bindings.setdefault(name, []).append(binding)

    def collect(self, statements: list) -> BindingCollector:
        for index, statement in enumerate(statements):
            self.add_statement(statement, index, nested=False)
        return self

    def add_statement(self, statement: Any, index: int, nested: bool) -> None:
        """The bindings of one statement of the scope, the ``index``-th at top level."""
        if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in statement.body:
                self._small(small, index, nested)
        elif isinstance(statement, cst.FunctionDef):
            self.add(statement.name.value, "def", statement, statement, index, nested)
        elif isinstance(statement, cst.ClassDef):
            self.add(statement.name.value, "class", statement, statement, index, nested)
        else:
            self._compound(statement, index)

    def _compound(self, statement: Any, index: int) -> None:
        if isinstance(statement, cst.If) and is_type_checking(statement.test):
            saved, self._type_only = self._type_only, True
            for inner in block_statements(statement.body):
                self.add_statement(inner, index, nested=True)
            self._type_only = saved
            for inner in orelse_statements(statement):
                self.add_statement(inner, index, nested=True)
            return
        if isinstance(statement, cst.For):
            for name in target_names(statement.target):
                self.add(name, "other", statement, statement, index, True)
        elif isinstance(statement, cst.With):
            for item in statement.items:
                if item.asname is not None:
                    for name in target_names(item.asname.name):
                        self.add(name, "other", statement, statement, index, True)
        elif isinstance(statement, (cst.Try, cst.TryStar)):
            for handler in statement.handlers:
                if handler.name is not None:
                    for name in target_names(handler.name.name):
                        self.add(name, "other", statement, handler, index, True)
        for inner in inner_statements(statement):
            self.add_statement(inner, index, nested=True)

    def _small(self, small: Any, index: int, nested: bool) -> None:
        if isinstance(small, cst.Assign):
            for target in small.targets:
                if isinstance(target.target, cst.Name):
                    self.add(target.target.value, "assign", small.value, small, index, nested)
                else:
                    for name in target_names(target.target):
                        self.add(name, "other", small, small, index, nested)
        elif isinstance(small, cst.AnnAssign):
            if isinstance(small.target, cst.Name):
                if small.value is not None:
                    self.add(small.target.value, "assign", small.value, small, index, nested)
                else:
                    self.add(small.target.value, "annotation", small, small, index, nested)
        elif isinstance(small, (cst.AugAssign, cst.Del)):
            for name in target_names(small.target):
                self.add(name, "other", small, small, index, nested)
        elif isinstance(small, cst.Import):
            for alias in small.names:
                full = alias.evaluated_name
                local = alias.evaluated_alias or full.split(".")[0]
                self.add(local, "import", small, small, index, nested, full if alias.asname else local)
        elif isinstance(small, cst.ImportFrom):
            self._import_from(small, index, nested)
        elif isinstance(small, (cst.Global, cst.Nonlocal)):
            self.declared.update(item.name.value for item in small.names)

    def _import_from(self, small: cst.ImportFrom, index: int, nested: bool) -> None:
        if isinstance(small.names, cst.ImportStar):
            module = dotted_name(small.module) if small.module is not None else None
            self.star_sources.append((len(small.relative), module or ""))
            return
        module = dotted_name(small.module) if small.module is not None else None
        level = len(small.relative)
        for alias in small.names:
            name = alias.evaluated_name
            local = alias.evaluated_alias or name
            if level:
                # ``from ..pkg import name`` is ``..pkg.name``: resolved against the file's package
                qualname = "." * level + (f"{module}.{name}" if module else name)
                self.add(local, "import", small, small, index, nested, qualname)
            elif module is None:
                self.add(local, "other", small, small, index, nested)
            else:
                self.add(local, "import", small, small, index, nested, f"{module}.{name}")


def dotted_name(node: cst.CSTNode) -> str | None:
    """``a.b.c`` -> ``"a.b.c"``; None for anything but a name or a chain of attributes of one
    (libcst's ``get_full_name_for_node`` also names calls and subscripts by their callee)."""
    base = node
    while isinstance(base, cst.Attribute):
        base = base.value
    return get_full_name_for_node(node) if isinstance(base, cst.Name) else None


def last_name(expr: cst.BaseExpression) -> str | None:
    """``f`` of ``f`` or ``a.b.f``."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


def target_names(target: cst.BaseExpression) -> list[str]:
    """The names an assignment target binds (through tuples, lists and starred targets)."""
    return [name.value for name in target_name_nodes(target)]


def target_name_nodes(target: cst.BaseExpression) -> list[cst.Name]:
    """The ``Name`` nodes of the names an assignment target binds."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in target_name_nodes(element.value)]
    if isinstance(target, cst.StarredElement):
        return target_name_nodes(target.value)
    return []


def block_statements(block: Any) -> list:
    """The statements of an indented block, or the one-line suite as a single statement."""
    if isinstance(block, cst.IndentedBlock):
        return list(block.body)
    return [block]


def inner_statements(statement: Any) -> list:
    """Statements nested in a compound statement that run in the same scope."""
    blocks = []
    if isinstance(statement, (cst.If, cst.For, cst.While, cst.With, cst.Try, cst.TryStar)):
        blocks.append(statement.body)
    if isinstance(statement, (cst.Try, cst.TryStar)):
        blocks.extend(handler.body for handler in statement.handlers)
        if statement.finalbody is not None:
            blocks.append(statement.finalbody.body)
    if isinstance(statement, cst.Match):
        blocks.extend(case.body for case in statement.cases)
    return [inner for block in blocks for inner in block_statements(block)] + orelse_statements(statement)


def orelse_statements(statement: Any) -> list:
    """The statements of a compound statement's ``else`` (an ``elif`` as one ``If``)."""
    orelse = getattr(statement, "orelse", None)
    if isinstance(orelse, cst.If):
        return [orelse]
    if orelse is not None:
        return block_statements(orelse.body)
    return []


def is_type_checking(test: cst.BaseExpression) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING`` (any module's): true for type checkers only."""
    return last_name(test) == "TYPE_CHECKING"


def parameters(params: cst.Parameters) -> list[cst.Param]:
    """Every parameter of a ``def``, ``*args`` and ``**kwargs`` included, in order."""
    found = [*params.posonly_params, *params.params]
    if isinstance(params.star_arg, cst.Param):
        found.append(params.star_arg)
    found.extend(params.kwonly_params)
    if params.star_kwarg is not None:
        found.append(params.star_kwarg)
    return found


def parameter_names(params: cst.Parameters) -> list[str]:
    return [param.name.value for param in parameters(params)]
