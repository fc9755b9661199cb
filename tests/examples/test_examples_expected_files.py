"""Each example ships a well-formed ``<name>.expected.json`` whose lines point at host moves."""

from __future__ import annotations

import ast
import json

import pytest
from examples_support import (
    EXAMPLE_NAMES,
    EXAMPLE_PATHS,
    EXAMPLES_DIR,
    expected_path,
    load_expected,
)

from offload_fixer.model import format_output_path, parse_output_path
from offload_fixer.rules import all_rules

CODES = {rule.code for rule in all_rules()}
KEYS = {"code", "line", "output_path", "function"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def host_placement_lines(tree: ast.Module) -> set[int]:
    """Lines where memory placement is written: a ``device_put`` call, a ``compute_on``
    block, or an ``in_shardings=`` / ``offload_dst=`` argument (host argument origins); for a
    module-level jit without ``in_shardings``, whose abstract arguments declare their memory
    (``ShapeDtypeStruct(..., sharding=...)``), its decorator."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name.endswith(("device_put", "compute_on")):
                lines.add(node.lineno)
            for keyword in node.keywords:
                if keyword.arg in ("in_shardings", "offload_dst"):
                    lines.add(keyword.lineno)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                keywords = decorator.keywords if isinstance(decorator, ast.Call) else []
                if _dotted(decorator).endswith("jit") and all(k.arg != "in_shardings" for k in keywords):
                    lines.add(decorator.lineno)
    return lines


def jitted_function_names(tree: ast.Module) -> set[str]:
    """Module-level ``def``s wrapped by ``jax.jit`` (directly or through ``functools.partial``)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                called = decorator.args[0] if isinstance(decorator, ast.Call) and decorator.args else None
                if _dotted(decorator).endswith("jit") or (called is not None and _dotted(called).endswith("jit")):
                    names.add(node.name)
    return names


def _eager_name(function: str) -> bool:
    """``slice (eager)``: the name ``run`` gives one of JAX's own jits for an eager operation."""
    name, _, eager = function.partition(" ")
    return eager == "(eager)" and name.isidentifier()


def test_every_example_has_an_expected_file():
    assert EXAMPLE_NAMES, "no examples found"
    missing = [name for name in EXAMPLE_NAMES if not expected_path(name).is_file()]
    assert not missing
    orphans = [
        p.name
        for p in EXAMPLES_DIR.glob("*.expected.json")
        if p.name.removesuffix(".expected.json") not in EXAMPLE_NAMES
    ]
    assert not orphans


@pytest.mark.parametrize("path", EXAMPLE_PATHS, ids=EXAMPLE_NAMES)
def test_expected_file_is_well_formed(path):
    entries = json.loads(expected_path(path.stem).read_text())
    assert isinstance(entries, list)
    source_lines = path.read_text().splitlines()
    seen = set()
    for entry in entries:
        assert set(entry) == KEYS, entry
        assert entry["code"] in CODES
        assert isinstance(entry["line"], int) and 1 <= entry["line"] <= len(source_lines)
        function = entry["function"]
        assert isinstance(function, str) and (function.isidentifier() or _eager_name(function)), function
        if entry["output_path"] is not None:
            assert format_output_path(parse_output_path(entry["output_path"])) == entry["output_path"]
        key = tuple(entry[k] for k in sorted(KEYS))
        assert key not in seen, f"duplicate entry {entry}"
        seen.add(key)


@pytest.mark.parametrize("path", EXAMPLE_PATHS, ids=EXAMPLE_NAMES)
def test_expected_lines_point_at_host_placements(path):
    tree = ast.parse(path.read_text())
    allowed = host_placement_lines(tree)
    jitted = jitted_function_names(tree)
    for entry in load_expected(path.stem):
        if _eager_name(entry["function"]):  # its line is the eager operation's, run at module level or in main()
            continue
        assert entry["line"] in allowed, (
            f"{path.name}:{entry['line']} is not a device_put / in_shardings / offload_dst / compute_on line"
        )
        assert entry["function"] in jitted, f"{entry['function']} is not a module-level jitted function"


@pytest.mark.parametrize("path", EXAMPLE_PATHS, ids=EXAMPLE_NAMES)
def test_example_is_a_script_with_jitted_functions(path):
    tree = ast.parse(path.read_text())
    top_level_defs = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert "main" in top_level_defs
    guards = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test).replace("'", '"') == '__name__ == "__main__"'
    ]
    assert len(guards) == 1 and ast.unparse(guards[0].body[0]) == "main()"
    assert jitted_function_names(tree), "an example needs a module-level jitted function for the tool to find"
