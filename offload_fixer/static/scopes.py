"""What each name of a scope holds, without running anything.

The check resolves ``jnp``/``jax``/``NamedSharding`` through the file's own imports and
assignments, collected per scope by :mod:`offload_fixer.source.bindings` (the collector the
codemods read too) instead of libcst's whole-file scope analysis. A name bound once has one
possible value; a name bound several times is known only where all its bindings are
straight-line statements of the scope, and then the value at a statement is the last binding
before it.
"""

from __future__ import annotations

import builtins
import unicodedata
from collections.abc import Sequence
from typing import Any

from offload_fixer.source.bindings import Binding, BindingCollector

from .outline import NEWLINE
from .statement_reads import group_of
from .values import UNKNOWN, Ref

_BUILTIN_NAMES = frozenset(vars(builtins))


class StaticScope:
    """A module, class or function body seen from outside its execution: what each name
    holds once the scope has run (for closures and globals) or at a given statement."""

    def __init__(
        self,
        interpreter: Any,
        statements: list,
        parent: StaticScope | None,
        params: Sequence[str] = (),
        unknown: frozenset = frozenset(),
        is_class: bool = False,
        collector: BindingCollector | None = None,
        module_path: str | None = None,
    ) -> None:
        """``collector``: the bindings of ``statements`` when already collected (it is not changed);
        ``module_path``: the file of a module scope (other scopes take their parent's)."""
        if collector is None:
            collector = BindingCollector().collect(statements)
        self.interpreter = interpreter
        self.module_path: str | None = module_path if module_path is not None or parent is None else parent.module_path
        self.bindings = collector.bindings
        self.parent = parent
        self.closure: StaticScope = parent.closure if is_class and parent is not None else self
        """What functions defined here close over: a class body is not visible to its methods."""
        self.unknown = set(unknown) | collector.declared | set(params)
        self.star_sources = collector.star_sources
        """Where the scope's star imports take names from (a module's only)."""
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
        if self.star_sources:
            return self.interpreter.star_imported(self.star_sources, self.module_path, name)
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

    def at(self, index: int) -> PositionedScope:
        return PositionedScope(self, index)

    def class_body(self, node: Any) -> Any:
        """The class statement ``node`` with its body (None: it cannot be read); a scope
        that parses a class's header alone (:class:`ForeignScope`) parses the rest here."""
        return node


class NotCut(Exception):
    """A statement of the checked file does not parse alone: it is analysed whole instead."""


class ForeignScope(StaticScope):
    """A module read statement by statement: another module of the project seen from the
    checked file, or (``whole_fallback=False``) the checked file itself. Its bindings are read
    on demand: ``ast`` (:class:`ModuleFacts`) says which top-level statements bind a name, and
    only those are parsed with libcst. Another module that cannot be cut into statements is
    parsed whole; for the checked file, :class:`NotCut` says to analyse it whole."""

    def __init__(self, interpreter: Any, facts: Any, whole_fallback: bool = True) -> None:
        super().__init__(interpreter, [], None, unknown=facts.mutated_globals, module_path=facts.path)
        self.facts = facts
        self.whole_fallback = whole_fallback
        self.star_sources = facts.star_sources
        self.chunks: dict[int, Any] = {}
        """Index -> the libcst chunk of each statement parsed so far (for positions)."""
        self.headers: dict[int, Any] = {}
        """Index -> the chunk of a class parsed without its body (:meth:`class_header`),
        for another module's classes: the body is parsed only if :meth:`class_body` is asked."""
        self.whole: StaticScope | None = None

    def lookup_at(self, name: str, index: int | None) -> Any:
        if self.whole is not None:
            return self.whole.lookup_at(name, index)
        if name not in self.bindings and name not in self.unknown:
            loaded = self._load(name)
            if loaded is None:
                if not self.whole_fallback:
                    raise NotCut(name)
                parsed = self.facts.parsed_whole()
                self.whole = StaticScope(
                    self.interpreter,
                    list(parsed.module.body),
                    None,
                    unknown=self.facts.mutated_globals,
                    module_path=self.facts.path,
                )
                return self.whole.lookup_at(name, index)
            self.bindings[name] = loaded
        return super().lookup_at(name, index)

    def binds(self, name: str) -> bool:
        return _as_ast_names_it(name) in self.facts.binders

    def _load(self, name: str) -> list[Binding] | None:
        found: list[Binding] = []
        for index in dict.fromkeys(self.facts.binders.get(_as_ast_names_it(name), ())):
            chunk = self.chunks.get(index)
            if chunk is None and self.whole_fallback:
                chunk = self.class_header(index)
                if chunk is not None:
                    self.headers[index] = chunk
            if chunk is None:
                chunk = self.chunk(index)
            if chunk is None:
                return None
            collector = BindingCollector()
            collector.add_statement(chunk.statements[0], index, nested=False)
            found.extend(collector.bindings.get(name, ()))
            self.unknown.update(collector.declared)
        return found

    def chunk(self, index: int) -> Any:
        """The libcst chunk of the ``index``-th top-level statement group, parsed on first use
        (None when it does not parse alone)."""
        chunk = self.chunks.get(index)
        if chunk is None:
            chunk = self.facts.chunk(index)
            if chunk is not None:
                self.chunks[index] = chunk
        return chunk

    def class_header(self, index: int) -> Any:
        """The libcst chunk of a class statement cut before its body, which becomes ``...``
        (None: the group is not one class, or its body does not start a line of its own).
        Its decorators and bases say whether the check can know the class at all
        (:meth:`.project_code.ProjectCode.class_value`): most classes of a project (a
        ``flax`` module, a test case) it cannot, and their bodies need not be parsed."""
        from .source import cached_chunk

        facts = self.facts
        if facts.outline.spans is None or not facts.outline.file_lines or index in facts.pruned:
            return None
        shape = group_of(facts, index).class_shape
        if shape is None:
            return None
        line, column = shape.body
        piece = facts.piece(index)
        ends = [match.end() for match in NEWLINE.finditer(piece)]
        relative = line - 1 - facts.line_offset(index)
        if not 0 < relative <= len(ends):
            return None
        start = ends[relative - 1]
        indent = piece[start : start + column]
        if indent.strip(" \t") or len(indent) != column:
            return None  # the body shares its first line with the end of the header
        header = piece[:start]
        newline = "\r\n" if header.endswith("\r\n") else header[-1]
        return cached_chunk(facts.cache, f"{header}{indent}...{newline}", index == 0, ("class header", index))

    def class_body(self, node: Any) -> Any:
        for index, header in self.headers.items():
            if header.statements[0] is node:
                chunk = self.chunk(index)
                return None if chunk is None else chunk.statements[0]
        return node

    def source(self) -> Any:
        """Where the parsed statements are, for the positions of findings in this module."""
        if self.whole is not None:
            return self.facts.parsed_whole()
        from .source import ParsedSource

        parsed = [*self.chunks.items(), *self.headers.items()]
        return ParsedSource(
            None, [(self.facts.line_offset(i), chunk) for i, chunk in sorted(parsed, key=lambda p: p[0])]
        )


def _as_ast_names_it(name: str) -> str:
    """A libcst name as ``ast`` spells it: NFKC-normalised, as Python reads identifiers
    (``échelle_𝔥`` is ``échelle_h``)."""
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


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
