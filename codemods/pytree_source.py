"""Following a pytree path (``[1]['mu']``) through the source that builds the value.

Returned values and ``out_shardings`` are read as literals: tuples and lists by index,
dicts by key, ``dict(k=...)`` and constructor calls by keyword, and a local name by its
one ``name = value`` assignment. Anything else is opaque: the path stops there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from codemods.sharding_exprs import string_value
from codemods.source_facts import FunctionInfo, Scope, SourceFacts
from codemods.targets import PathKey


@dataclass(frozen=True)
class Located:
    node: cst.BaseExpression
    """The expression at the path, or the deepest one reached."""
    rest: tuple[PathKey, ...]
    """Keys left over when the path entered something opaque (empty: exact)."""
    through_name: bool = False
    """The path went through a local name's assignment."""


def child_at(expr: cst.BaseExpression, key: PathKey) -> cst.BaseExpression | None:
    kind, value = key
    if isinstance(expr, (cst.Tuple, cst.List)) and kind == "index":
        elements = expr.elements
        if any(isinstance(e, cst.StarredElement) for e in elements[: int(value) + 1]):
            return None
        return elements[int(value)].value if int(value) < len(elements) else None
    if isinstance(expr, cst.Dict) and kind in ("key", "index"):
        for element in expr.elements:
            if isinstance(element, cst.DictElement) and _key_value(element.key) == value:
                return element.value
        return None
    if isinstance(expr, cst.Call) and kind in ("key", "attr") and _is_plain_call(expr):
        for arg in expr.args:
            if arg.keyword is not None and arg.keyword.value == value:
                return arg.value
    return None


def follow_name(facts: SourceFacts, scope: Scope, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The value of a local name assigned exactly once in ``scope``."""
    if isinstance(expr, cst.Name):
        binding = scope.single_value(expr.value)
        if binding is not None and binding.value is not None:
            return binding.value
    return None


def locate(facts: SourceFacts, scope: Scope, expr: cst.BaseExpression, keys: Sequence[PathKey]) -> Located:
    rest = tuple(keys)
    through = False
    seen: set[int] = set()
    name_stop: Located | None = None
    """Where the path stood before following the last name: used if that led nowhere."""
    while rest:
        child = child_at(expr, rest[0])
        if child is not None:
            expr, rest, name_stop = child, rest[1:], None
            continue
        value = follow_name(facts, scope, expr)
        if value is None or id(value) in seen:
            break
        seen.add(id(value))
        name_stop = name_stop or Located(expr, rest, through)
        expr, through = value, True
    return name_stop if rest and name_stop is not None else Located(expr, rest, through)


def build_like(
    facts: SourceFacts,
    scope: Scope,
    expr: cst.BaseExpression,
    targets: Sequence[tuple[PathKey, ...]],
    target_text: str,
    other_text: str,
    sort_keys: bool = False,
) -> str | None:
    """Source text of a pytree prefix shaped like ``expr`` along the target paths, with
    ``target_text`` at each target and ``other_text`` for every other subtree; None when a
    target path enters something whose structure the source does not show. ``sort_keys``
    orders dict entries by key, as pytrees compare them."""
    if any(not t for t in targets):
        return target_text
    if not targets:
        return other_text
    seen: set[int] = set()
    while not isinstance(expr, (cst.Tuple, cst.List, cst.Dict, cst.Call)):
        value = follow_name(facts, scope, expr)
        if value is None or id(value) in seen:
            return None
        seen.add(id(value))
        expr = value

    def sub(key: PathKey) -> list[tuple[PathKey, ...]]:
        return [t[1:] for t in targets if t[0] == key]

    def part(child: cst.BaseExpression, key: PathKey) -> str | None:
        return build_like(facts, scope, child, sub(key), target_text, other_text, sort_keys)

    used: set[PathKey] = set()
    pieces: list[str] = []
    order: list[str] = []
    if isinstance(expr, (cst.Tuple, cst.List)):
        if any(isinstance(e, cst.StarredElement) for e in expr.elements):
            return None
        for index, element in enumerate(expr.elements):
            key: PathKey = ("index", index)
            used.add(key)
            text = part(element.value, key)
            if text is None:
                return None
            pieces.append(text)
        if isinstance(expr, cst.List):
            body = "[" + ", ".join(pieces) + "]"
        else:
            body = "(" + ", ".join(pieces) + ("," if len(pieces) == 1 else "") + ")"
    elif isinstance(expr, cst.Dict):
        for element in expr.elements:
            if not isinstance(element, cst.DictElement) or _key_value(element.key) is None:
                return None
            value = _key_value(element.key)
            key = ("index", value) if isinstance(value, int) else ("key", value)
            used.add(key)
            text = part(element.value, key)
            if text is None:
                return None
            pieces.append(f"{facts.module.code_for_node(element.key)}: {text}")
            order.append(repr(value))
        if sort_keys:
            pieces = [piece for _, piece in sorted(zip(order, pieces))]
        body = "{" + ", ".join(pieces) + "}"
    elif isinstance(expr, cst.Call) and _is_plain_call(expr) and isinstance(expr.func, cst.Name) and expr.func.value == "dict":
        for arg in expr.args:
            assert arg.keyword is not None
            key = ("key", arg.keyword.value)
            used.add(key)
            text = part(arg.value, key)
            if text is None:
                return None
            pieces.append(f"{arg.keyword.value}={text}")
        if sort_keys:
            pieces.sort()
        body = "dict(" + ", ".join(pieces) + ")"
    else:
        return None
    wanted = {t[0] for t in targets}
    return body if wanted <= used else None


def returned_values(function: FunctionInfo, lines: Sequence[int]) -> list[tuple[int, cst.BaseExpression]]:
    """(line, value) of the function's returns with a value, limited to ``lines`` if given."""
    return [
        (site.line, site.node.value)
        for site in function.returns
        if site.node.value is not None and (not lines or site.line in lines)
    ]


def drop_covered(paths: Sequence[tuple[PathKey, ...]]) -> list[tuple[PathKey, ...]]:
    """Paths that no other path contains (``[0]`` covers ``[0]['a']``), in input order."""
    unique = list(dict.fromkeys(paths))
    return [p for p in unique if not any(q != p and p[: len(q)] == q for q in unique)]


def parenthesized_if_tuple(expr: cst.BaseExpression) -> cst.BaseExpression:
    """A bare ``a, b`` tuple needs parentheses to become one argument."""
    if isinstance(expr, cst.Tuple) and not expr.lpar:
        return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return expr


def _key_value(key: cst.BaseExpression) -> str | int | None:
    if isinstance(key, cst.Integer):
        value = key.evaluated_value
        return value if isinstance(value, int) else None
    return string_value(key)


def _is_plain_call(call: cst.Call) -> bool:
    return all(arg.keyword is not None and not arg.star for arg in call.args)

