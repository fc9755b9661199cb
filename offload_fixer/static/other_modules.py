"""What the interpreter reads from the project's other modules: the value an import binds,
an attribute of a module, a name a star import binds, each module read statement by statement
(:class:`~.scopes.ForeignScope`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from .evaluator import Evaluator
from .project import Project, is_modeled
from .scopes import ForeignScope, StaticScope
from .values import UNKNOWN, ProjectModule, Ref


class OtherModules(Evaluator):
    """The :class:`~.interpreter.Interpreter`'s reading of other modules (a mixin: the names
    below are the interpreter's)."""

    project: Project | None
    path: str | None
    """The checked file (None: a text of no file)."""
    module_scope: StaticScope
    foreign: dict[str, ForeignScope | None]
    """The other modules read so far, by path (None: not a module that can be read)."""

    def imported(self, qualname: str, importer: str | None, modules_only: bool = False) -> Any:
        """What an import binds: a module of the project (or a name it defines), else a
        name the check knows by its qualified name. ``..pkg.name`` is relative. The parts of
        an import's module path are modules: all of ``import a.b as c`` (``modules_only``),
        all but the last of ``from a.b import c``."""
        level = len(qualname) - len(qualname.lstrip("."))
        if not level and (self.project is None or importer is None or is_modeled(qualname)):
            return Ref(qualname)
        if self.project is None or importer is None:
            return UNKNOWN
        parts = [p for p in qualname[level:].split(".") if p]
        if level:
            base = self.project.relative_base(importer, level)
            if base is None:
                return UNKNOWN
            value: Any = ProjectModule(self.project.package_at(base))
        else:
            head = self.project.module_path(parts[:1], self.project.search_roots(importer))
            if head is None:
                return Ref(qualname)
            value, parts = ProjectModule(head), parts[1:]
        for position, part in enumerate(parts):
            value = self.module_attribute(value, part, in_path=modules_only or position < len(parts) - 1)
        return value

    def module_attribute(self, module: Any, name: str, in_path: bool = False) -> Any:
        """``module.name``: what the module binds, else its submodule ``name``. ``in_path``: a
        part of an import's module path (``b`` of ``from a.b import c``), which Python imports
        as the submodule whatever the package binds by that name (a star import may bind any)."""
        if not isinstance(module, ProjectModule) or self.project is None:
            return UNKNOWN
        if in_path:
            submodule = self.project.submodule(module.path, name)
            if submodule is not None:
                return ProjectModule(submodule)
        if module.path == self.path:
            return self.module_scope.lookup(name)
        scope = self.foreign_scope(module.path)
        if scope is not None and scope.binds(name):
            return scope.lookup(name)
        submodule = self.project.submodule(module.path, name)
        if submodule is not None:
            return ProjectModule(submodule)
        if scope is not None and scope.star_sources:
            return self.star_imported(scope.star_sources, module.path, name)
        return UNKNOWN

    def star_imported(
        self, sources: Sequence[tuple[int, str]], importer: str | None, name: str, seen: frozenset[str] = frozenset()
    ) -> Any:
        """What ``from <module> import *`` (each of ``sources``, the last first) binds ``name``
        to: a public name one of the project's modules binds, or binds through its own star
        imports; UNKNOWN for any other (a library's star import may bind anything)."""
        if self.project is None or importer is None or name.startswith("_"):
            return UNKNOWN
        for path in reversed(self.project.star_modules(importer, sources)):
            if path in seen or path == self.path:
                continue
            scope = self.foreign_scope(path)
            if scope is not None and scope.binds(name):
                return scope.lookup(name)
            if scope is not None and scope.star_sources:
                found = self.star_imported(scope.star_sources, path, name, seen | {path})
                if found is not UNKNOWN:
                    return found
        return UNKNOWN

    def foreign_scope(self, path: str) -> ForeignScope | None:
        if path not in self.foreign:
            facts = self.project.facts(path) if self.project is not None and os.path.isfile(path) else None
            self.foreign[path] = None if facts is None else ForeignScope(self, facts)
        return self.foreign[path]
