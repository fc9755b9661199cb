"""Code that a test expects to fail: the body of ``with pytest.raises(...)`` or
``with self.assertRaises(...)``. A finding there is the error the test asserts, so the planner
offers a suppression for it, never an edit (an edit would make the test fail)."""

from __future__ import annotations

import ast
import functools

ASSERTS_AN_ERROR = frozenset({"raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp"})
"""The last name of a context manager that asserts its body raises: ``pytest.raises``,
``self.assertRaises``, ``unittest``'s regex forms."""


def error_asserted_at(text: str, line: int) -> str | None:
    """``with pytest.raises(...)`` (as written, with its line) when ``line`` is in the body of
    such a block of ``text``; None elsewhere, and for a text that is not Python."""
    for start, end, spelled in _blocks(text):
        if start < line <= end:
            return f"`with {spelled}(...)` (line {start})"
    return None


@functools.lru_cache(maxsize=8)
def _blocks(text: str) -> tuple[tuple[int, int, str], ...]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return ()
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.With, ast.AsyncWith)):
            continue
        for item in node.items:
            call = item.context_expr
            if isinstance(call, ast.Call) and _last_name(call.func) in ASSERTS_AN_ERROR:
                found.append((node.lineno, node.end_lineno or node.lineno, ast.unparse(call.func)))
                break
    return tuple(found)


def _last_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None
