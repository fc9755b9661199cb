"""Name bindings per scope, collected from libcst statements without running anything.

The check resolves ``jnp``/``jax``/``NamedSharding`` through the file's own imports and
assignments instead of libcst's whole-file scope analysis (several times the cost of parsing,
see fixer-lessons.md). A name bound once has one possible value; a name bound several times
is known only where all its bindings are straight-line statements of the scope, and then the
value at a statement is the last binding before it.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any

import libcst as cst

from codemods.source_facts import target_names

from .values import UNKNOWN, Ref

_BUILTIN_NAMES = frozenset(vars(builtins))


@dataclass(frozen=True, eq=False)
class Binding:
    kind: str
    """``assign`` (``name = node``), ``def``, ``class``, ``import`` (``qualname``), ``other``."""
    node: Any
    index: int
    """Index of the top-level statement of the scope that contains the binding."""
    nested: bool
    """Inside a compound statement (``if``/``for``/``with``/``try``) of the scope."""
    qualname: str = ""


def block_statements(block: Any) -> list:
    """The statements of an indented block, or the one-line suite as a single statement."""
    if isinstance(block, cst.IndentedBlock):
        return list(block.body)
    return [block]


def dotted_name(node: Any) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


class BindingCollector:
    """Collects the bindings of one scope: its statements, not nested functions or classes."""

    def __init__(self) -> None:
        self.bindings: dict[str, list[Binding]] = {}
        self.declared: set[str] = set()
        """Names declared ``global``/``nonlocal``: assigned through another scope."""
        self.star_import = False

    def add(self, name: str, kind: str, node: Any, index: int, nested: bool, qualname: str = "") -> None:
        self.bindings.setdefault(name, []).append(Binding(kind, node, index, nested, qualname))

    def collect(self, statements: list) -> "BindingCollector":
        for index, statement in enumerate(statements):
            self._statement(statement, index, nested=False)
        return self

    def _statement(self, statement: Any, index: int, nested: bool) -> None:
        if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in statement.body:
                self._small(small, index, nested)
        elif isinstance(statement, cst.FunctionDef):
            self.add(statement.name.value, "def", statement, index, nested)
        elif isinstance(statement, cst.ClassDef):
            self.add(statement.name.value, "class", statement, index, nested)
        else:
            self._compound(statement, index)

    def _compound(self, statement: Any, index: int) -> None:
        if isinstance(statement, cst.For):
            for name in target_names(statement.target):
                self.add(name, "other", statement, index, True)
        elif isinstance(statement, cst.With):
            for item in statement.items:
                if item.asname is not None:
                    for name in target_names(item.asname.name):
                        self.add(name, "other", statement, index, True)
        elif isinstance(statement, (cst.Try, cst.TryStar)):
            for handler in statement.handlers:
                if handler.name is not None:
                    for name in target_names(handler.name.name):
                        self.add(name, "other", statement, index, True)
        for inner in inner_statements(statement):
            self._statement(inner, index, nested=True)

    def _small(self, small: Any, index: int, nested: bool) -> None:
        if isinstance(small, cst.Assign):
            for target in small.targets:
                if isinstance(target.target, cst.Name):
                    self.add(target.target.value, "assign", small.value, index, nested)
                else:
                    for name in target_names(target.target):
                        self.add(name, "other", small, index, nested)
        elif isinstance(small, cst.AnnAssign):
            if isinstance(small.target, cst.Name):
                kind = "assign" if small.value is not None else "other"
                self.add(small.target.value, kind, small.value, index, nested)
        elif isinstance(small, cst.AugAssign):
            for name in target_names(small.target):
                self.add(name, "other", small, index, nested)
        elif isinstance(small, cst.Del):
            for name in target_names(small.target):
                self.add(name, "other", small, index, nested)
        elif isinstance(small, cst.Import):
            for alias in small.names:
                full = dotted_name(alias.name) or ""
                if alias.asname is not None:
                    self.add(alias.asname.name.value, "import", small, index, nested, full)
                else:
                    head = full.split(".")[0]
                    self.add(head, "import", small, index, nested, head)
        elif isinstance(small, cst.ImportFrom):
            self._import_from(small, index, nested)
        elif isinstance(small, (cst.Global, cst.Nonlocal)):
            self.declared.update(item.name.value for item in small.names)

    def _import_from(self, small: cst.ImportFrom, index: int, nested: bool) -> None:
        module = dotted_name(small.module) if small.module is not None else None
        if isinstance(small.names, cst.ImportStar):
            self.star_import = True
            return
        level = len(small.relative)
        for alias in small.names:
            name = alias.name.value if isinstance(alias.name, cst.Name) else dotted_name(alias.name)
            local = alias.asname.name.value if alias.asname is not None else name
            if level:
                # ``from ..pkg import name`` is ``..pkg.name``: resolved against the file's package
                qualname = "." * level + (f"{module}.{name}" if module else name)
                self.add(local, "import", small, index, nested, qualname)
            elif module is None:
                self.add(local, "other", small, index, nested)
            else:
                self.add(local, "import", small, index, nested, f"{module}.{name}")


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
    statements = [inner for block in blocks for inner in block_statements(block)]
    orelse = getattr(statement, "orelse", None)
    if isinstance(orelse, cst.If):
        statements.append(orelse)
    elif orelse is not None:
        statements.extend(block_statements(orelse.body))
    return statements


def parameter_names(params: cst.Parameters) -> list[str]:
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    if isinstance(params.star_arg, cst.Param):
        names.append(params.star_arg.name.value)
    if params.star_kwarg is not None:
        names.append(params.star_kwarg.name.value)
    return names


class StaticScope:
    """A module, class or function body seen from outside its execution: what each name
    holds once the scope has run (for closures and globals) or at a given statement."""

    def __init__(self, interpreter: Any, statements: list, parent: "StaticScope | None",
                 params: list[str] = (), unknown: frozenset = frozenset(), is_class: bool = False,
                 collector: BindingCollector | None = None, module_path: str | None = None) -> None:
        """``collector``: the bindings of ``statements`` when already collected (it is not changed);
        ``module_path``: the file of a module scope (other scopes take their parent's)."""
        if collector is None:
            collector = BindingCollector().collect(statements)
        self.interpreter = interpreter
        self.module_path = module_path if module_path is not None or parent is None else parent.module_path
        self.bindings = collector.bindings
        self.parent = parent
        self.closure = parent.closure if is_class and parent is not None else self
        """What functions defined here close over: a class body is not visible to its methods."""
        self.unknown = set(unknown) | collector.declared | set(params)
        self.star_import = collector.star_import
        self._values: dict[int, Any] = {}

    def lookup(self, name: str) -> Any:
        return self.lookup_at(name, None)

    def lookup_at(self, name: str, index: int | None) -> Any:
        if name in self.unknown:
            return UNKNOWN
        bindings = self.bindings.get(name)
        if bindings:
            return self._value_at(bindings, index)
        if self.parent is not None:
            return self.parent.lookup(name)
        if self.star_import:
            return UNKNOWN
        return Ref(f"builtins.{name}") if name in _BUILTIN_NAMES else UNKNOWN

    def _value_at(self, bindings: list[Binding], index: int | None) -> Any:
        if len(bindings) == 1:
            return self._value(bindings[0])
        if any(b.nested for b in bindings):
            if all(b.kind == "import" and b.qualname == bindings[0].qualname for b in bindings):
                return self._value(bindings[0])
            return UNKNOWN
        visible = bindings if index is None else [b for b in bindings if b.index < index]
        return self._value(visible[-1]) if visible else UNKNOWN

    def _value(self, binding: Binding) -> Any:
        key = id(binding)
        if key in self._values:
            return self._values[key]
        self._values[key] = UNKNOWN  # a definition that refers to itself stays unknown
        value = self.interpreter.binding_value(self, binding)
        self._values[key] = value
        return value

    def at(self, index: int) -> "PositionedScope":
        return PositionedScope(self, index)


class ForeignScope(StaticScope):
    """Another module of the project seen from the checked file. Its bindings are read on
    demand: ``ast`` (:class:`ModuleFacts`) says which top-level statements bind a name, and only
    those are parsed with libcst. A module that cannot be cut into statements is parsed whole."""

    def __init__(self, interpreter: Any, facts: Any) -> None:
        super().__init__(interpreter, [], None, unknown=facts.mutated_globals, module_path=facts.path)
        self.facts = facts
        self.star_import = facts.star_import
        self.chunks: dict[int, Any] = {}
        """Index -> the libcst chunk of each statement parsed so far (for positions)."""
        self.whole: StaticScope | None = None

    def lookup_at(self, name: str, index: int | None) -> Any:
        if self.whole is not None:
            return self.whole.lookup_at(name, index)
        if name not in self.bindings and name not in self.unknown:
            loaded = self._load(name)
            if loaded is None:
                parsed = self.facts.parsed_whole()
                self.whole = StaticScope(self.interpreter, list(parsed.module.body), None,
                                         unknown=self.facts.mutated_globals, module_path=self.facts.path)
                return self.whole.lookup_at(name, index)
            self.bindings[name] = loaded
        return super().lookup_at(name, index)

    def binds(self, name: str) -> bool:
        return name in self.facts.binders

    def _load(self, name: str) -> list[Binding] | None:
        found: list[Binding] = []
        for index in dict.fromkeys(self.facts.binders.get(name, ())):
            chunk = self.chunks.get(index) or self.facts.chunk(index)
            if chunk is None:
                return None
            self.chunks[index] = chunk
            collector = BindingCollector()
            collector._statement(chunk.statements[0], index, nested=False)
            found.extend(collector.bindings.get(name, ()))
            self.unknown.update(collector.declared)
        return found

    def source(self) -> Any:
        """Where the parsed statements are, for the positions of findings in this module."""
        if self.whole is not None:
            return self.facts.parsed_whole()
        from .source import ParsedSource

        return ParsedSource(None, [(self.facts.line_offset(i), chunk) for i, chunk in sorted(self.chunks.items())])


class PositionedScope:
    """A static scope as seen by the statement at ``index`` while the scope runs."""

    def __init__(self, scope: StaticScope, index: int) -> None:
        self.scope = scope
        self.index = index

    @property
    def module_path(self) -> str | None:
        return self.scope.module_path

    def lookup(self, name: str) -> Any:
        return self.scope.lookup_at(name, self.index)


class Frame:
    """One abstract execution of a function body: a mutable environment over its closure."""

    def __init__(self, local_names: frozenset, parent: Any) -> None:
        self.env: dict[str, Any] = {}
        self.local_names = local_names
        self.parent = parent

    @property
    def module_path(self) -> str | None:
        return self.parent.module_path

    def lookup(self, name: str) -> Any:
        value = self.env.get(name)
        if value is not None:
            return value
        if name in self.local_names:
            return UNKNOWN
        return self.parent.lookup(name)
