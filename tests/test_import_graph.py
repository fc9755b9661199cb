"""The package's import graph: no cycles, and no module reaching into another's private names.

Every import counts, wherever it is written: at module level, inside a function (a lazy
import is still a dependency), and under ``if TYPE_CHECKING:`` (a type is one too). A cycle
means neither module can be understood, tested or loaded without the other, and a lazy import
that closes one only hides it; a private name (``_SEVERITY``) is one its module may change
without telling anyone. The graph is read from the source with ``ast``; nothing is imported.

One exception is allowed, and only one: the rule modules (``offload_fixer.rules``) name the
types of the context each engine hands their hooks (``Diagnoser``, ``StaticSite``) for the
type checker alone, while the engines import the rules to call them. Such a cycle closes only
through a ``TYPE_CHECKING`` import out of the rules package; any other is a failure.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "offload_fixer"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE


@dataclass(frozen=True)
class Reach:
    """``module`` uses ``name`` of ``target`` at ``line``: an import or an attribute of one."""

    module: str
    line: int
    target: str
    name: str
    typing_only: bool = False
    """Written under ``if TYPE_CHECKING:``."""


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = (PACKAGE, *path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def reaches(module: str, path: Path, known: dict[str, Path]) -> Iterator[Reach]:
    """Each module of the package that ``module`` imports, and each private name it takes
    from one (``from m import _x``, ``m._x`` on a name bound to a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    tree.body = [statement for statement in tree.body if not _runs_as_program(statement)]
    is_package = path.name == "__init__.py"
    typing_lines = {
        id(inner)
        for statement in ast.walk(tree)
        if isinstance(statement, ast.If) and _dotted(statement.test).endswith("TYPE_CHECKING")
        for inner in ast.walk(statement)
    }
    bound: dict[str, str] = {}  # local name -> module of the package
    for node in ast.walk(tree):
        typing_only = id(node) in typing_lines
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + ".") or alias.name == PACKAGE:
                    yield Reach(module, node.lineno, alias.name, "", typing_only)
                    bound[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, is_package, node)
            if not (source == PACKAGE or source.startswith(PACKAGE + ".")):
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in known:
                    yield Reach(module, node.lineno, submodule, "", typing_only)
                    bound[alias.asname or alias.name] = submodule
                else:
                    yield Reach(module, node.lineno, source, alias.name, typing_only)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            yield Reach(module, node.lineno, bound[node.value.id], node.attr)
        elif isinstance(node, ast.Attribute) and _dotted(node.value) in bound.values():
            yield Reach(module, node.lineno, _dotted(node.value), node.attr)


def _runs_as_program(statement: ast.stmt) -> bool:
    """``if __name__ == "__main__":``: code that runs only when the file is run as a program
    (``python -m offload_fixer.runner``), as the module ``__main__``; its imports are that
    program's, made after the module itself was loaded, never the module's own."""
    test = statement.test if isinstance(statement, ast.If) else None
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def graph(typing: bool = True) -> tuple[dict[str, set[str]], list[Reach]]:
    """The edges between the package's modules (``typing``: imports made for the type checker
    alone count too), and every reach."""
    known = modules()
    edges: dict[str, set[str]] = {name: set() for name in known}
    everything = []
    for name, path in known.items():
        for reach in reaches(name, path, known):
            everything.append(reach)
            if reach.target in known and reach.target != name and (typing or not reach.typing_only):
                edges[name].add(reach.target)
    return edges, everything


RULES = f"{PACKAGE}.rules"


def _without_rule_hook_types(edges: dict[str, set[str]], reaches_: list[Reach]) -> dict[str, set[str]]:
    """``edges`` less the one allowed kind of type-only import: out of the rules package."""
    hook_types = {
        (r.module, r.target)
        for r in reaches_
        if r.typing_only and (r.module == RULES or r.module.startswith(RULES + "."))
    }
    runtime, _ = graph(typing=False)
    return {
        module: {t for t in targets if (module, t) not in hook_types or t in runtime[module]}
        for module, targets in edges.items()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(edges[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_the_package_has_no_import_cycle() -> None:
    edges, everything = graph()
    assert cycles(_without_rule_hook_types(edges, everything)) == []


def test_the_rule_hooks_types_are_the_only_typing_cycles_and_none_is_real() -> None:
    runtime, _ = graph(typing=False)
    assert cycles(runtime) == []
    edges, _ = graph()
    for component in cycles(edges):
        assert any(m == RULES or m.startswith(RULES + ".") for m in component), component


def test_no_module_uses_another_modules_private_names() -> None:
    _, everything = graph()
    private = [
        f"{reach.module}:{reach.line} uses {reach.target}.{reach.name}"
        for reach in everything
        if reach.target != reach.module and _is_private(reach.name)
    ]
    assert private == []


def test_the_graph_sees_imports_in_functions_and_under_type_checking(tmp_path: Path) -> None:
    """The reader itself, on a package of three modules that import each other every way."""
    module = tmp_path / "a.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from offload_fixer.b import B\n"
        "def f():\n"
        "    from . import c\n"
        "    import offload_fixer.b as bee\n"
        "    return c._hidden, bee.shown\n"
        "if __name__ == '__main__':\n"
        "    from offload_fixer.d import main\n"
    )
    known = {f"{PACKAGE}.{name}": tmp_path / f"{name}.py" for name in "abcd"}
    found = {(r.target, r.name) for r in reaches(f"{PACKAGE}.a", module, known)}
    assert found == {
        (f"{PACKAGE}.b", "B"),
        (f"{PACKAGE}.c", ""),
        (f"{PACKAGE}.b", ""),
        (f"{PACKAGE}.c", "_hidden"),
        (f"{PACKAGE}.b", "shown"),
    }
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]
