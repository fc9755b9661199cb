"""A fix never adds a name the program cannot read: each name an edit reads that the code
did not read before must be bound where it is read, when the module runs.

Python reads a name in a function from the function (and those around it), else from the
module's globals, else from the builtins. A fix that spells ``jax.memory.Space.Device`` in a
module whose ``import jax`` sits under ``if TYPE_CHECKING:`` compiles, and fails with a
``NameError`` the first time the line runs. So once a fix is made, the names its statements
read more often than the original statements did are looked up: those the new code reads as
globals (:mod:`symtable`) must be bound at the module's top level by code that runs (an
import, an assignment, a ``def``, a ``for`` target, ``global`` in a function; ``if
TYPE_CHECKING:`` bodies left out), or be builtins. A star import at top level binds what
cannot be told, and the check gives way there.
"""

from __future__ import annotations

import ast
import builtins
import symtable
from collections import Counter
from collections.abc import Iterable, Sequence

MODULE_NAMES = frozenset(
    {"__name__", "__file__", "__doc__", "__builtins__", "__spec__", "__loader__", "__package__", "__path__"}
    | {"__cached__", "__annotations__", "__dict__"}
)
"""What Python binds in every module before its first line runs."""
_BUILTINS = frozenset(dir(builtins))


def unbound_reads(
    module: ast.Module, before: Sequence[ast.stmt], after: Sequence[ast.stmt], after_code: str
) -> list[str]:
    """The names the statements ``after`` (``after_code``: their text) read more often than
    ``before`` did that nothing binds where they are read once the module (``module``: the
    whole text with ``after`` in it) runs; sorted."""
    introduced = +(Counter(_reads(after)) - Counter(_reads(before)))
    if not introduced:
        return []
    bound = module_bindings(module)
    if bound is None:
        return []
    missing = {name for name in introduced if name not in bound and name not in _BUILTINS}
    if not missing:
        return []
    try:
        read_as_globals = _global_reads(symtable.symtable(after_code, "<fix>", "exec"))
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # a newer Python's syntax: compiled elsewhere
        return []
    return sorted(missing & read_as_globals)


def module_bindings(module: ast.Module) -> set[str] | None:
    """The names the module's top level binds when it runs (None: a star import binds what
    cannot be told)."""
    bound = set(MODULE_NAMES)
    pending: list[ast.stmt] = list(module.body)
    while pending:
        statement = pending.pop()
        if isinstance(statement, ast.ImportFrom) and any(alias.name == "*" for alias in statement.names):
            return None
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in statement.names)
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(statement.name)
            bound.update(_declared_global(statement))
            bound.update(_stored(statement.decorator_list))
        elif isinstance(statement, ast.If) and _is_type_checking(statement.test):
            pending.extend(statement.orelse)
            bound.update(_stored([statement.test]))
        elif isinstance(statement, ast.AnnAssign) and statement.value is None:
            continue  # `name: T` declares, binds nothing
        else:
            bound.update(_stored(_own_parts(statement)))
            pending.extend(_inner_statements(statement))
    return bound


def _reads(statements: Iterable[ast.stmt]) -> Iterable[str]:
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                yield node.id


def _global_reads(table: symtable.SymbolTable) -> set[str]:
    found: set[str] = set()
    pending = [table]
    while pending:
        scope = pending.pop()
        found.update(s.get_name() for s in scope.get_symbols() if s.is_referenced() and s.is_global())
        pending.extend(scope.get_children())
    return found


def _is_type_checking(test: ast.expr) -> bool:
    name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
    return name == "TYPE_CHECKING"


def _declared_global(definition: ast.stmt) -> set[str]:
    """Names a function declares ``global`` (bound in the module once it runs and assigns them)."""
    return {name for node in ast.walk(definition) if isinstance(node, ast.Global) for name in node.names}


def _own_parts(statement: ast.stmt) -> list[ast.AST]:
    """The parts of a statement that run at the top level, nested statements left out."""
    nested = set(map(id, _inner_statements(statement)))
    parts: list[ast.AST] = []
    for _, value in ast.iter_fields(statement):
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, ast.AST) and id(item) not in nested:
                parts.append(item)
    return parts


def _inner_statements(statement: ast.stmt) -> list[ast.stmt]:
    inner: list[ast.stmt] = []
    for field in ("body", "orelse", "finalbody"):
        value = getattr(statement, field, None)
        if isinstance(value, list):
            inner.extend(item for item in value if isinstance(item, ast.stmt))
    for handler in getattr(statement, "handlers", ()):
        inner.extend(handler.body)
    for case in getattr(statement, "cases", ()):
        inner.extend(case.body)
    return inner


def _stored(parts: Iterable[ast.AST]) -> set[str]:
    """Names bound in ``parts`` (assignment targets, ``:=``, ``except ... as``, match captures),
    not inside a function, a lambda or a comprehension, which bind their own names."""
    found: set[str] = set()
    pending = list(parts)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            pending.extend(inner for inner in ast.walk(node) if isinstance(inner, ast.NamedExpr))  # := binds outside
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            found.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            found.add(node.rest)
        pending.extend(ast.iter_child_nodes(node))
    return found
