"""Which top-level statements of the checked file can hold a jit site, decided from ``ast``.

The interpreter parses a statement with libcst only when it looks at it; finding the jit
sites looks at every statement unless told which can hold one. A site is a ``def`` whose
decorator, or a call whose callee, evaluates to ``jax.jit``/``pjit`` (:data:`.names.JIT`) or
to something made from it (``functools.partial(jax.jit, ...)``, ``jax.jit(...)`` with options
only). Every such value starts where ``jit`` is spelled: in the statement itself (an attribute
``.jit``/``.pjit``, a name imported as ``jit``), or in another statement whose value flows here
through a module-level name, or in another module of the project. So a statement can hold a
site only when

* its text contains ``jit``, or
* it reads a module-level name bound by such a statement (to a fixed point: a helper that
  returns a jitted function makes its callers candidates), or by an import of ``jax.jit`` or
  ``pjit`` under another name, or by an import of a module of the project (whatever that module
  binds: it is not read here).

An import statement is judged by the names it binds, not by its text (``from jax import jit,
numpy`` makes ``jit`` a candidate name, not ``numpy``). This over-approximates the interpreter
(no shadowing, any read counts), so a statement ruled out holds no site it would find.
A star import, which may bind any name, leaves every statement a candidate.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from .names import JIT
from .prefilter import JIT_MARKER
from .project import ModuleFacts, is_modeled


def jit_candidates(facts: ModuleFacts, is_project_module: Callable[[int, str], bool]) -> list[int]:
    """Indices of the top-level statement groups that can hold a jit site, in file order.
    ``is_project_module(level, dotted)``: whether an import of that module may reach a module
    of the project (else it binds only names the check knows by their qualified names)."""
    groups = facts.outline.groups
    if facts.star_import or facts.outline.spans is None:
        return list(range(len(groups)))
    pieces = facts.pieces()
    binds: list[set[str]] = [set() for _ in groups]
    for name, indices in facts.binders.items():
        for index in indices:
            binds[index].add(name)
    jit_names: set[str] = set()
    candidate = []
    reads = []
    for group, piece in zip(groups, pieces):
        names_read, imports, nested_imports = _walk(group)
        reads.append(names_read)
        for statement in imports:
            jit_names.update(_jit_imports(statement, is_project_module))
        candidate.append(
            (JIT_MARKER in piece and not all(isinstance(st, (ast.Import, ast.ImportFrom)) for st in group))
            or any(_jit_imports(statement, is_project_module) for statement in nested_imports)
        )
    changed = True
    while changed:
        changed = False
        for index, found in enumerate(candidate):
            if not found and not reads[index].isdisjoint(jit_names):
                candidate[index] = found = changed = True
            if found and not binds[index] <= jit_names:
                jit_names |= binds[index]
                changed = True
    return [index for index, found in enumerate(candidate) if found]


def _jit_imports(statement: ast.Import | ast.ImportFrom, is_project_module: Callable[[int, str], bool]) -> list[str]:
    """The names a top-level import binds to ``jax.jit``/``pjit`` or to a module of the project
    (or a name of one)."""
    found = []
    if isinstance(statement, ast.Import):
        for alias in statement.names:
            local = alias.asname or alias.name.split(".")[0]
            bound = alias.name if alias.asname else local
            if bound in JIT or (not is_modeled(alias.name) and is_project_module(0, alias.name)):
                found.append(local)
        return found
    module = statement.module or ""
    level = statement.level or 0
    for alias in statement.names:
        qualname = f"{module}.{alias.name}" if module else alias.name
        if qualname in JIT or ((level or not is_modeled(module)) and is_project_module(level, module)):
            found.append(alias.asname or alias.name)
    return found


def _walk(group: Sequence[ast.stmt]) -> tuple[set[str], list, list]:
    """Every name a group loads, in any scope; its module-level imports; the imports inside
    its functions and classes."""
    reads: set[str] = set()
    imports: list = []
    nested: list = []
    stack: list[tuple[ast.AST, bool]] = [(statement, False) for statement in group]
    while stack:
        node, inner = stack.pop()
        kind = type(node)
        if kind is ast.Name:
            if isinstance(node.ctx, ast.Load):  # type: ignore[attr-defined]
                reads.add(node.id)  # type: ignore[attr-defined]
            continue
        if kind is ast.Import or kind is ast.ImportFrom:
            (nested if inner else imports).append(node)
            continue
        inner = inner or kind in _SCOPES
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    return reads, imports, nested


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
