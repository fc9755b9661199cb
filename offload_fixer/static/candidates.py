"""Which top-level statements of the checked file can hold a jit site, decided from ``ast``.

The interpreter parses a statement with libcst only when it looks at it; finding the jit
sites looks at every statement unless told which can hold one. A site is a ``def`` whose
decorator, or a call whose callee, evaluates to ``jax.jit``/``pjit`` (:data:`.names.JIT`) or
to something made from it (``functools.partial(jax.jit, ...)``, ``jax.jit(...)`` with options
only). Every such value starts where ``jit`` is spelled: in the statement itself (an attribute
``.jit``/``.pjit``, a name imported as ``jit``), or in another statement, of this module or of
another module of the project, whose value flows here through a module-level name. So a
statement can hold a site only when

* its text contains ``jit`` (an import is judged by the names it binds instead), or
* it reads a module-level name that may hold such a value: one bound by a statement that
  is itself a candidate (a helper that returns a jitted function makes its callers
  candidates), by an import of ``jax.jit``/``pjit`` under another name, or by an import of a
  project module's name that may hold one, judged the same way in that module. A project
  module read through attributes (``utils.helper``) is judged by the attribute it is read at,
  as the interpreter resolves it; a module used any other way (passed, patched) may hold what
  any name it binds may (a package, anything: any of its submodules).

This over-approximates the interpreter (no shadowing, any read counts), so a statement ruled out holds no site it would find.
Names resolve as the interpreter resolves them: a part of an import's module path is the
submodule (``b`` of ``from a.b import c``, all of ``import a.b as c``), another attribute of a
module what it binds, else its submodule. A star import binds what the project's module it
names binds (public names, through that module's own star imports too), as the interpreter
binds them; a library's, nothing it knows.
Two things the interpreter never reads values through are left out: annotations (``x:
TensorSpec`` is a type, not a value), and the classes it cannot know (no decorator, and bases
that are neither ``object`` nor ``NamedTuple``: a framework's layer or test case), whose names
give it an unknown value whatever their bodies spell.

A site can be reported only where a host memory kind reaches it, and every host value starts
where a host memory kind is spelled as a word (``"pinned_host"``, ``.Host``; not a name such
as ``enable_pinned_host_transfer``) or ``compute_on`` is. The destinations of JAX's offload
policies (``offload_dst="pinned_host"``) start none: a policy moves residuals, which ``run``
judges. The same reasoning, with those words in place of ``jit``, tells which statements a
host value can reach (:func:`site_candidates`): a jit site in any other statement is analysed
to no finding, so it is never parsed. A test class that jits in every method but
offloads in none, beside one that does, is the common case in real repositories.

Over 500 lines on purpose: one resolver, whose rules for imports, attributes, star imports,
classes and offload policies share its passes and the run's answers (:mod:`.shared_answers`).
"""

from __future__ import annotations

import ast
import contextlib
import os
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from .names import JIT, import_binding
from .project import ModuleFacts, Project, is_modeled
from .shared_answers import shared_answers
from .statement_reads import ClassShape, Group, group_of, keep_groups_only

_MAY_JIT = "jit"
"""The atom of a value that may be (or make) a jit; the others are project modules' paths."""
_MODELLED_BASES = frozenset({"object", "NamedTuple"})
"""The bases a class the interpreter knows may have, by their last name."""
_WHOLE_MODULE = "module"
"""The key of a module's answer as a whole (:meth:`_Resolver._module_holds`), beside its groups'."""


def jit_candidates(facts: ModuleFacts, project: Project | None, importer: str | None) -> list[int]:
    """Indices of the top-level statement groups of ``facts`` (the checked file, imported as
    ``importer``; None: a text of no file, whose imports stay names) that can hold a jit site."""
    return _fixed_point(_resolver(facts, project, importer), facts, range(len(facts.outline.groups)))


def site_candidates(
    facts: ModuleFacts, project: Project | None, importer: str | None, among: Sequence[int] | None = None
) -> list[int]:
    """The :func:`jit_candidates` that a host value can reach too: the only statements whose
    jit sites can be reported; of the indices ``among`` (in their order) when given."""
    indices = range(len(facts.outline.groups)) if among is None else among
    found = _fixed_point(_resolver(facts, project, importer), facts, indices)
    if not found:
        return found
    return _fixed_point(_resolver(facts, project, importer, host=True), facts, found)


def eager_candidates(
    facts: ModuleFacts, project: Project | None, importer: str | None, among: Sequence[int] | None = None
) -> list[int]:
    """The top-level statement groups whose code runs outside any jit (:mod:`.eager`: a
    statement other than an import, a ``def`` or a class; a test function; a class with test
    methods) that a host value can reach; of the indices ``among`` (in their order) when
    given. Which test methods of such a class: :func:`.pruning.reached_tests`."""
    indices = range(len(facts.outline.groups)) if among is None else among
    roots = [index for index in indices if group_of(facts, index).runs_eagerly]
    if not roots:
        return roots
    return _fixed_point(_resolver(facts, project, importer, host=True), facts, roots)


def opaque_classes(
    facts: ModuleFacts, project: Project | None, importer: str | None, indices: Sequence[int]
) -> set[int]:
    """Of ``indices``, the groups that are one class statement whose value the interpreter
    never knows, whatever its body (:meth:`_Resolver._opaque`: a test case's class)."""
    resolver = _resolver(facts, project, importer)
    with resolver.attributed(resolver.main_path):
        return {
            index
            for index in indices
            if (shape := group_of(facts, index).class_shape) is not None and resolver._opaque(facts, shape)
        }


def reads_host(
    facts: ModuleFacts,
    project: Project | None,
    importer: str | None,
    reader: int,
    reads: Sequence[tuple[Sequence[tuple[str, tuple[str, ...]]], Sequence[ast.Import | ast.ImportFrom]]],
) -> set[int]:
    """Which of ``reads`` (each: the names read with the attributes read from them, and the
    imports made, by a part of group ``reader``) may read a host value through a module-level
    name or an import, as :func:`site_candidates` decides for whole groups (:mod:`.pruning`)."""
    resolver = _resolver(facts, project, importer, host=True)
    with resolver.attributed(resolver.main_path):
        while True:
            found = {
                position
                for position, (names, imports) in enumerate(reads)
                if any(
                    resolver._import_value(facts, statement, alias)
                    for statement in imports
                    for alias in statement.names
                )
                or any(
                    (name in facts.binders or facts.star_sources) and resolver._read(facts, name, chain, reader)
                    for name, chain in dict.fromkeys(names)
                )
            }
            if not resolver.next_pass():
                return found


def _imports_binding(
    statements: Sequence[ast.Import | ast.ImportFrom], name: str
) -> list[tuple[ast.Import | ast.ImportFrom, ast.alias]]:
    """The imports among ``statements`` that bind ``name``, with the alias that binds it."""
    return [
        (statement, alias)
        for statement in statements
        for alias in statement.names
        if import_binding(statement, alias)[0] == name
    ]


def _resolver(facts: ModuleFacts, project: Project | None, importer: str | None, host: bool = False) -> _Resolver:
    """The resolver of one check of ``facts`` (a fresh :class:`ModuleFacts` each check), by
    kind: what it settled about the checked file answers every later question of the check
    (the candidates, the eager roots, the test methods a host value reaches) without deciding
    it again."""
    kept = _RESOLVERS.get(facts)
    if kept is None:
        kept = _RESOLVERS[facts] = {}
    found = kept.get(host)
    if found is None or found.project is not project or found.main_path != _absolute(importer):
        found = kept[host] = _Resolver(facts, project, importer, host)
    return found


def _absolute(importer: str | None) -> str | None:
    return None if importer is None else os.path.abspath(importer)


_RESOLVERS: weakref.WeakKeyDictionary[ModuleFacts, dict[bool, _Resolver]] = weakref.WeakKeyDictionary()


def _fixed_point(resolver: _Resolver, facts: ModuleFacts, indices: Sequence[int]) -> list[int]:
    with resolver.attributed(resolver.main_path):
        while True:  # to the least fixed point: a cycle of statements with no jit in it holds none
            found = [index for index in indices if resolver.candidate(facts, index)]
            if not resolver.next_pass():
                return found


class _Resolver:
    """What module-level names may hold, by module, for one check: a jit, or (``host``) a host
    value."""

    def __init__(self, facts: ModuleFacts, project: Project | None, importer: str | None, host: bool = False) -> None:
        self.host = host
        self.main = facts
        self.project = project
        self.main_path = _absolute(importer)
        self.active: set[tuple[int, int | str]] = set()
        self.found: dict[tuple[int, int | str], bool] = {}
        """This pass's answers, by (facts, group); they depend on other files: kept no longer."""
        self.previous: dict[tuple[int, int | str], bool] = {}
        """The last pass's: what a statement still being decided (a cycle) is taken to be."""
        self.values: dict[tuple[int, str, int | None], frozenset[str]] = {}
        """This pass's values of module-level names, by (facts, name, reader), kept as ``found``."""
        self.previous_values: dict[tuple[int, str, int | None], frozenset[str]] = {}
        self.active_values: set[tuple[int, str, int | None]] = set()
        self.settled: dict[tuple[Any, ...], Any] = {}
        """The answers of passes that changed nothing (``found``'s and ``values``' alike, told
        apart by the length of their keys): final, for the checked file too."""
        self.changed = False
        self.shared = shared_answers(project, facts, self.main_path, host)
        self.module = self.main_path
        """The module whose answer is being found (``shared`` only)."""
        self.modules: dict[int, ModuleFacts] = {id(facts): facts}
        self.noted: set[str] = set()
        """Modules whose ``asked`` this check has noted (``shared`` only)."""

    def next_pass(self) -> bool:
        """Start another pass when this one changed an answer (they only ever turn true)."""
        changed, self.changed = self.changed, False
        if not changed:
            self.settled.update(self.found)
            self.settled.update(self.values)
        if not changed and self.shared is not None:
            # A pass that changed nothing: its answers are the least fixed point, final.
            for answers in (self.found, self.values):
                for key, answer in answers.items():
                    facts = self.modules[key[0]]
                    if facts is not self.main:  # the checked file's own facts: of this check only
                        self.shared.keep(facts, key[1:], answer)
        self.previous.update(self.found)
        self.found = {}
        self.previous_values.update(self.values)
        self.values = {}
        return changed

    def candidate(self, facts: ModuleFacts, index: int) -> bool:
        return self._decided(facts, (id(facts), index), lambda: self._candidate(facts, index))

    def _kept(self, facts: ModuleFacts, key: tuple[Any, ...]) -> Any:
        """The run's final answer about another module (None: none yet), noting what it asked."""
        assert self.shared is not None
        if facts is self.main:
            self._use(self.main_path)
            return None
        path = facts.path
        self._use(path)
        found = self.shared.answer(facts, key[1:])
        if found is not None and path not in self.noted:
            self._note(path)
        return found

    def _use(self, path: str | None) -> None:
        """Note that the answer being found uses one of module ``path``."""
        assert self.shared is not None and self.module is not None and path is not None
        if path != self.module:
            uses = self.shared.uses.get(self.module)
            if uses is None:
                uses = self.shared.uses[self.module] = set()
            uses.add(path)

    def _path(self, facts: ModuleFacts) -> str | None:
        return self.main_path if facts is self.main else facts.path

    def _note(self, path: str) -> None:
        """Note what the answers of ``path``, and of the modules they used, asked of the disk."""
        assert self.shared is not None and self.project is not None
        stack = [path]
        while stack:
            module = stack.pop()
            if module in self.noted:
                continue
            self.noted.add(module)
            asked = self.shared.asked.get(module)
            if asked is not None:
                self.project.note(asked)
            stack.extend(self.shared.uses.get(module, ()))

    def attributed(self, path: str | None) -> Any:
        """Inside the block, the disk is asked for the answers of ``path`` (``shared`` only)."""
        if self.shared is None or self.project is None or path is None:
            return contextlib.nullcontext()
        return self._attributed(path)

    def _attributed(self, path: str) -> Any:
        assert self.shared is not None and self.project is not None

        @contextlib.contextmanager
        def block() -> Any:
            outer, self.module = self.module, path
            try:
                with self.project.attributing(self.shared.record(path)):  # type: ignore[union-attr]
                    yield
            finally:
                self.module = outer

        return block()

    def _answered(self, facts: ModuleFacts, key: tuple[Any, ...], answers: dict[Any, Any]) -> Any:
        """This pass's answer for ``key`` (in ``answers``), else the run's final one (None: neither)."""
        found = answers.get(key)
        if found is None:
            found = self.settled.get(key)
        if found is not None:
            if self.shared is not None:
                self._use(self._path(facts))
            return found
        return self._kept(facts, key) if self.shared is not None else None

    def _deciding(self, facts: ModuleFacts) -> Any:
        """The block that finds an answer about ``facts``: attributed to its module (``shared``)."""
        self.modules[id(facts)] = facts
        if self.shared is not None and self._path(facts) != self.module:
            return self._attributed(self._path(facts) or facts.path)
        return contextlib.nullcontext()

    def _decided(self, facts: ModuleFacts, key: tuple[int, int | str], decide: Callable[[], bool]) -> bool:
        found = self._answered(facts, key, self.found)
        if found is not None:
            return found
        if key in self.active:
            return self.previous.get(key, False)
        self.active.add(key)
        try:
            with self._deciding(facts):
                found = decide()
        finally:
            self.active.discard(key)
        if found != self.previous.get(key, False):
            self.changed = True
        self.found[key] = found
        return found

    def _candidate(self, facts: ModuleFacts, index: int) -> bool:
        group = self._group(facts, index)
        if self.host:
            spells = group.spells_host or not all(self._from_jax(facts, group, name) for name in group.policy_callees)
        else:
            spells = group.spells_jit
        return spells or self._reads_jit(facts, index, group.reads)

    def _from_jax(self, facts: ModuleFacts, group: Group, name: str) -> bool:
        """Whether every binding of ``name`` that ``group`` may read is an import from JAX (the
        callee of an offload policy call: one of the project's own may make anything)."""
        imports = _imports_binding(group.nested_imports, name)
        for index in facts.binders.get(name, ()):
            bound = _imports_binding(self._group(facts, index).imports, name)
            if not bound:
                return False  # a def, a class or an assignment
            imports.extend(bound)
        qualnames = [import_binding(statement, alias)[1] for statement, alias in imports]
        return bool(qualnames) and all(qualname == "jax" or qualname.startswith("jax.") for qualname in qualnames)

    def binds_jit(self, facts: ModuleFacts, index: int) -> bool:
        """Whether the values a group gives the names it binds may be (or make) a jit: a
        candidate's may, but a class's only through what its body holds outside its methods."""
        group = self._group(facts, index)
        if group.class_shape is not None and self._opaque(facts, group.class_shape):
            return False
        if not group.has_class or self.host:
            return self.candidate(facts, index)
        return self._decided(
            facts,
            (id(facts), -1 - index),
            lambda: group.value_spells_jit or self._reads_jit(facts, index, group.value_reads),
        )

    def _opaque(self, facts: ModuleFacts, shape: ClassShape) -> bool:
        """Whether a class statement gives its name a value the interpreter never knows
        (:meth:`.project_code.ProjectCode.class_value` knows dataclasses, ``NamedTuple``\\s
        and plain classes): no decorator, and neither a base that may be ``NamedTuple`` nor
        bases that may all be ``object``. Nothing read through it (its methods, its
        attributes, its instances) is then a jit or a host value, whatever its body spells:
        the many classes of a project that subclass a framework's (a layer, a test case)."""
        if shape.decorated or not (shape.bases or shape.keywords):
            return False
        return all(base is not None and not self._may_be_modelled_base(facts, base) for base in shape.bases)

    def _may_be_modelled_base(
        self, facts: ModuleFacts, base: tuple[str, ...], visited: frozenset[tuple[str, str]] = frozenset()
    ) -> bool:
        """Whether a base named ``base`` may be ``object`` or ``typing.NamedTuple``: by its
        last name, or for a plain name through what binds it in the module (an assignment
        may bind anything; an import from a project module, what binds the name there)."""
        if base[-1] in _MODELLED_BASES:
            return True
        if len(base) > 1 or base[0] not in facts.binders:
            return bool(facts.star_sources)
        for index in facts.binders[base[0]]:
            group = self._group(facts, index)
            if group.class_shape is not None and group.class_shape.name == base[0]:
                continue
            bound = _imports_binding(group.imports, base[0])
            if not bound:
                return True
            for statement, alias in bound:
                if import_binding(statement, alias)[1].rsplit(".", 1)[-1] in _MODELLED_BASES:
                    return True
                origin = self._imported_from(facts, statement, alias)
                if origin is not None and (origin[0].path, origin[1]) not in visited:
                    key = (origin[0].path, origin[1])
                    if self._may_be_modelled_base(origin[0], (origin[1],), visited | {key}):
                        return True
        return False

    def _imported_from(
        self, facts: ModuleFacts, statement: ast.Import | ast.ImportFrom, alias: ast.alias
    ) -> tuple[ModuleFacts, str] | None:
        """The project module a ``from ... import name`` takes its name from, and the name
        there; None for a library's, a plain ``import`` or a name the project does not hold."""
        if not isinstance(statement, ast.ImportFrom) or self.project is None or alias.name == "*":
            return None
        importer = self.main_path if facts is self.main else facts.path
        if importer is None:
            return None
        module = self.project.from_module(importer, statement.level or 0, statement.module or "")
        origin = None if module is None else self._facts(module)
        return None if origin is None else (origin, alias.name)

    def _reads_jit(self, facts: ModuleFacts, index: int, reads: list[tuple[str, tuple[str, ...]]]) -> bool:
        group = self._group(facts, index)
        if any(
            self._import_value(facts, statement, alias)
            for statement in group.nested_imports
            for alias in statement.names
        ):
            return True
        return any(
            (name in facts.binders or facts.star_sources) and self._read(facts, name, chain, index)
            for name, chain in dict.fromkeys(reads)
        )

    def _group(self, facts: ModuleFacts, index: int) -> Group:
        return group_of(facts, index)

    def _read(self, facts: ModuleFacts, name: str, chain: tuple[str, ...], reader: int | None) -> bool:
        """Whether ``name.chain`` read in ``facts`` (by its group ``reader``) may hold a jit:
        the jit atom, or a project module used as a value that may hold one by some name."""
        value = self._value(facts, name, reader)
        for attribute in chain:
            if not value or _MAY_JIT in value:
                break
            value = frozenset(atom for path in value for atom in self._attribute(path, attribute))
        return _MAY_JIT in value or any(self._module_holds(path) for path in value)

    def _module_holds(self, path: str) -> bool:
        """Whether a project module used as a value (passed, stored, patched) may give a jit
        through any name it binds. A package may give any of its submodules too: it may."""
        facts = self._facts(path) if os.path.basename(path) != "__init__.py" else None
        if facts is None:
            return True  # a package, a namespace directory, a module that cannot be read
        return self._decided(
            facts,
            (id(facts), _WHOLE_MODULE),
            lambda: (
                any(self._read(facts, name, (), None) for name in facts.binders)
                or any(self._module_holds(source) for source in self._star_modules(facts))
            ),
        )

    def _value(self, facts: ModuleFacts, name: str, reader: int | None) -> frozenset[str]:
        """What a module-level name may hold: empty (no jit), or the jit atom and the project
        modules it may be. Imports that lead back to a name being resolved (modules that
        import from each other) take its last pass's value, as statements do."""
        key = (id(facts), name, reader)
        found = self._answered(facts, key, self.values)
        if found is not None:
            return found
        before = self.previous_values.get(key, frozenset())
        if key in self.active_values:
            return before
        self.active_values.add(key)
        try:
            with self._deciding(facts):
                found = self._resolve_value(facts, name, reader)
        finally:
            self.active_values.discard(key)
        if found != before:
            self.changed = True
        self.values[key] = found
        return found

    def _resolve_value(self, facts: ModuleFacts, name: str, reader: int | None) -> frozenset[str]:
        if name not in facts.binders:
            return self._star_value(facts, name)
        found: set[str] = set()
        for index in dict.fromkeys(facts.binders.get(name, ())):
            # A group's own reads of what it binds add nothing it does not already hold.
            if index != reader and self.binds_jit(facts, index):
                return frozenset({_MAY_JIT})
            for statement, alias in _imports_binding(self._group(facts, index).imports, name):
                found |= self._import_value(facts, statement, alias)
        return frozenset(found)

    def _import_value(
        self, facts: ModuleFacts, statement: ast.Import | ast.ImportFrom, alias: ast.alias
    ) -> frozenset[str]:
        """What one import binds, as :meth:`.interpreter.Interpreter.imported` resolves it."""
        level = 0 if isinstance(statement, ast.Import) else statement.level or 0
        qualname = import_binding(statement, alias)[1][level:]
        if qualname in JIT and not self.host:
            return frozenset({_MAY_JIT})
        importer = self.main_path if facts is self.main else facts.path
        project = self.project
        if (not level and is_modeled(qualname)) or project is None or importer is None:
            return frozenset()  # a name the check knows by its qualified name: not a jit
        parts = [part for part in qualname.split(".") if part]
        if level:
            base = project.relative_base(importer, level)
            if base is None:
                return frozenset()
            value = frozenset({project.package_at(base)})
        else:
            head = project.module_path(parts[:1], project.search_roots(importer))
            if head is None:
                return frozenset()
            value, parts = frozenset({head}), parts[1:]
        for position, part in enumerate(parts):
            if _MAY_JIT in value:
                break
            in_path = isinstance(statement, ast.Import) or position < len(parts) - 1
            value = frozenset(atom for path in value for atom in self._attribute(path, part, in_path))
        return value

    def _attribute(self, path: str, name: str, in_path: bool = False) -> frozenset[str]:
        """``module.name`` for a project module, as :meth:`.interpreter.Interpreter.module_attribute`
        takes it: what the module binds, else its submodule; a part of an import's module path
        (``in_path``), the submodule first."""
        assert self.project is not None
        submodule = self.project.submodule(path, name) if in_path else None
        if submodule is not None:
            return frozenset({submodule})
        facts = self._facts(path)
        if facts is not None and name in facts.binders:
            return self._value(facts, name, None)
        submodule = self.project.submodule(path, name)
        if submodule is not None:
            return frozenset({submodule})
        return frozenset() if facts is None else self._star_value(facts, name)

    def _star_value(self, facts: ModuleFacts, name: str, seen: frozenset[str] = frozenset()) -> frozenset[str]:
        """What a name only ``facts``'s star imports may bind may hold, from the project's
        modules they import, as :meth:`.interpreter.Interpreter.star_imported` finds it."""
        if name.startswith("_"):
            return frozenset()
        found: set[str] = set()
        for path in self._star_modules(facts):
            source = self._facts(path) if path not in seen else None
            if source is not None and name in source.binders:
                found |= self._value(source, name, None)
            elif source is not None:
                found |= self._star_value(source, name, seen | {path})
        return frozenset(found)

    def _star_modules(self, facts: ModuleFacts) -> list[str]:
        """The project's modules the star imports of ``facts`` take names from, but the checked file."""
        importer = self.main_path if facts is self.main else facts.path
        if self.project is None or importer is None:
            return []
        return [path for path in self.project.star_modules(importer, facts.star_sources) if path != self.main_path]

    def _facts(self, path: str) -> ModuleFacts | None:
        if path == self.main_path:
            return self.main
        assert self.project is not None
        facts = self.project.facts(path) if os.path.isfile(path) else None
        if facts is not None and not facts.outline.compacted:
            keep_groups_only(facts)  # a run reads most of its groups: their trees are not kept
        return facts
