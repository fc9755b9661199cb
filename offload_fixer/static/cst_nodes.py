"""Walking a libcst tree fast, past the layout tokens that no diagnostic names."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

import libcst as cst

_LAYOUT_FIELDS = frozenset(
    {
        "lpar",
        "rpar",
        "comma",
        "semicolon",
        "leading_lines",
        "lines_after_decorators",
        "header",
        "footer",
        "newline",
        "equal",
        "colon",
        "lbrace",
        "rbrace",
        "lbracket",
        "rbracket",
        "first_line",
        "empty_lines",
        "indent",
        "dot",
        "asynchronous",
        "operator",
    }
)
"""Node fields (with ``whitespace*``) that hold only layout tokens: no node a diagnostic names."""


def is_layout(field: str) -> bool:
    """Whether a node's field holds only layout tokens (:data:`_LAYOUT_FIELDS`)."""
    return field in _LAYOUT_FIELDS or field.startswith("whitespace")


_NODE_FIELDS: dict[type, tuple] = {}


def walk_nodes(nodes: Sequence[Any], skipped: Collection[int] = ()) -> Iterator[Any]:
    """Every node under ``nodes`` but layout tokens (and but those whose ids are ``skipped``,
    and what is under them). Checks types by exact class (libcst's ``isinstance`` goes through
    ``ABCMeta`` and would cost most of the walk)."""
    stack = [node for node in nodes if id(node) not in skipped]
    while stack:
        node = stack.pop()
        if skipped and id(node) in skipped:
            continue
        yield node
        fields = _NODE_FIELDS.get(type(node))
        if fields is None:
            fields = tuple(name for name in type(node).__dataclass_fields__ if not is_layout(name))
            _NODE_FIELDS[type(node)] = fields
        for name in fields:
            child = getattr(node, name)
            if type(child) in (tuple, list):
                stack.extend(item for item in child if _is_node(type(item)))
            elif _is_node(type(child)):
                stack.append(child)


_IS_NODE: dict[type, bool] = {}


def _is_node(kind: type) -> bool:
    found = _IS_NODE.get(kind)
    if found is None:
        found = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return found


def function_ranges(nodes: Sequence[Any], positions: Mapping[Any, Any]) -> list[tuple[Any, str]]:
    """``(code range, name)`` of each ``def`` under ``nodes``, the ranges from ``positions``."""
    return [(positions[node], node.name.value) for node in walk_nodes(nodes) if isinstance(node, cst.FunctionDef)]
