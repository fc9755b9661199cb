"""Following a pytree path (``[1]['mu']``) through the source that builds the value.

Returned values and ``out_shardings`` are read as literals: tuples and lists by index,
dicts by key, ``dict(k=...)`` and constructor calls by keyword, and a local name by its
one ``name = value`` assignment. Anything else is opaque: the path stops there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from offload_fixer.codemods.sharding_exprs import HOST_KINDS, string_value
from offload_fixer.codemods.source_facts import FunctionInfo, Scope, SourceFacts
from offload_fixer.model import PathKey, format_output_path


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
        assert isinstance(value, int), "an index key holds an int"
        position = value
        if any(isinstance(e, cst.StarredElement) for e in elements[: position + 1]):
            return None
        return elements[position].value if position < len(elements) else None
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


def no_part_at(facts: SourceFacts, scope: Scope, value: cst.BaseExpression, keys: Sequence[PathKey]) -> str | None:
    """Why the path ``keys`` names no part of ``value``, where the source shows every part of
    the literal the path stops at (a tuple, list or dict without ``*``/``**``, dict keys
    spelled as literals): ``the result is a tuple of 3 ([0], [1], [2])``. ``None`` where the
    path names a part, or the source cannot tell (a call, a computed value: every array in it
    may be that output)."""
    located = locate(facts, scope, value, keys)
    if not located.rest:
        return None
    parts = _shown_parts(located.node)
    if parts is None:
        return None
    at = format_output_path(keys[: len(keys) - len(located.rest)])
    kind = "dict" if isinstance(located.node, cst.Dict) else type(located.node).__name__.lower()
    shown = ", ".join(format_output_path((part,)) for part in parts)
    return f"{at or 'the result'} is a {kind} of {len(parts)}" + (f" ({shown})" if shown else "")


def _shown_parts(expr: cst.BaseExpression) -> list[PathKey] | None:
    """Every child path key of a literal whose children the source shows all of; else None."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        if any(isinstance(e, cst.StarredElement) for e in expr.elements):
            return None
        return [("index", i) for i in range(len(expr.elements))]
    if isinstance(expr, cst.Dict):
        parts: list[PathKey] = []
        for element in expr.elements:
            value = _key_value(element.key) if isinstance(element, cst.DictElement) else None
            if value is None:  # ``**other`` or a computed key: the dict may hold any key
                return None
            parts.append(("index", value) if isinstance(value, int) else ("key", value))
        return parts
    return None


Keys = tuple[PathKey, ...]


@dataclass(frozen=True)
class OutputTree:
    """Every flat output of a function (pytree path, memory kind), as the analysis saw them:
    what an ``out_shardings`` prefix must mirror where the source does not show it."""

    leaves: tuple[tuple[Keys, str], ...]

    def under(self, at: Keys) -> list[tuple[Keys, str]]:
        return [(keys[len(at) :], kind) for keys, kind in self.leaves if keys[: len(at)] == at]

    def covered(self, at: Keys, targets: Sequence[Keys]) -> bool:
        """Every output under ``at`` is a target or host memory already: one sharding for all."""
        below = self.under(at)
        return bool(below) and all(
            kind in HOST_KINDS or any(rest[: len(t)] == t for t in targets) for rest, kind in below
        )

    def prefix(
        self,
        at: Keys,
        targets: Sequence[Keys],
        target_text: str,
        other_text: str,
        quote: str,
        sequences: str | None = None,
    ) -> tuple[str | None, str]:
        """(text of a prefix for the sub-tree at ``at``, or None and why not). ``sequences="tuple"``:
        the caller knows the sequences on the way are tuples (the returns show it)."""
        if any(not t for t in targets) or self.covered(at, targets):
            return target_text, ""
        if not targets:
            return other_text, ""
        below = self.under(at)
        keys = list(dict.fromkeys(rest[0] for rest, _ in below if rest))
        kinds = {kind for kind, _ in keys}
        where = f"output {format_output_path(at)}" if at else "the result"
        if kinds == {"key"}:
            pieces = []
            for key in keys:
                text, why = self.prefix(
                    (*at, key), [t[1:] for t in targets if t[0] == key], target_text, other_text, quote, sequences
                )
                if text is None:
                    return None, why
                pieces.append(f"{quote}{key[1]}{quote}: {text}")
            return "{" + ", ".join(pieces) + "}", ""
        if kinds == {"index"} and sequences == "tuple" and [k[1] for k in keys] == list(range(len(keys))):
            items = []
            for key in keys:
                text, why = self.prefix(
                    (*at, key), [t[1:] for t in targets if t[0] == key], target_text, other_text, quote, sequences
                )
                if text is None:
                    return None, why
                items.append(text)
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")", ""
        if kinds == {"index"}:
            return None, (
                f"{where} holds {', '.join(format_output_path((k,)) for k in keys)}, and the source does not "
                "show whether it is a tuple or a list, which out_shardings must match"
            )
        if kinds == {"attr"}:
            return None, (
                f"{where} is a pytree node with fields {', '.join(str(k[1]) for k in keys)} (a named "
                "tuple or dataclass); out_shardings needs an instance of that type here, which the "
                "source does not build where it is returned"
            )
        return None, f"{where} has a structure out_shardings cannot spell"


def build_like(
    facts: SourceFacts,
    scope: Scope,
    expr: cst.BaseExpression,
    targets: Sequence[tuple[PathKey, ...]],
    target_text: str,
    other_text: str,
    sort_keys: bool = False,
    tree: OutputTree | None = None,
    at: Keys = (),
    why: list[str] | None = None,
) -> str | None:
    """Source text of a pytree prefix shaped like ``expr`` along the target paths, with
    ``target_text`` at each target and ``other_text`` for every other subtree; None when a
    target path enters something whose structure the source does not show. ``sort_keys``
    orders dict entries by key, as pytrees compare them. With the function's output ``tree``
    (``at`` is ``expr``'s path in it), a sub-tree whose outputs are all targets gets one
    ``target_text``, and a sub-tree the source does not show (a call's result) is spelled from
    the tree; ``why`` collects the reasons it could not be."""
    if any(not t for t in targets):
        return target_text
    if not targets:
        return other_text
    if tree is not None and tree.covered(at, targets):
        return target_text
    seen: set[int] = set()
    while not isinstance(expr, (cst.Tuple, cst.List, cst.Dict, cst.Call)) or (
        isinstance(expr, cst.Call) and not _is_constructor(expr)
    ):
        value = follow_name(facts, scope, expr) if not isinstance(expr, cst.Call) else None
        if value is None or id(value) in seen:
            if tree is None:
                return None
            text, reason = tree.prefix(at, targets, target_text, other_text, facts.quote)
            if text is None and why is not None:
                why.append(reason)
            return text
        seen.add(id(value))
        expr = value

    def sub(key: PathKey) -> list[tuple[PathKey, ...]]:
        return [t[1:] for t in targets if t[0] == key]

    def part(child: cst.BaseExpression, key: PathKey) -> str | None:
        return build_like(facts, scope, child, sub(key), target_text, other_text, sort_keys, tree, (*at, key), why)

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
        for entry in expr.elements:
            if not isinstance(entry, cst.DictElement) or _key_value(entry.key) is None:
                return None
            entry_key = _key_value(entry.key)
            key = ("index", entry_key) if isinstance(entry_key, int) else ("key", entry_key)
            used.add(key)
            text = part(entry.value, key)
            if text is None:
                return None
            pieces.append(f"{facts.module.code_for_node(entry.key)}: {text}")
            order.append(repr(entry_key))
        if sort_keys:
            pieces = [piece for _, piece in sorted(zip(order, pieces))]
        body = "{" + ", ".join(pieces) + "}"
    elif isinstance(expr, cst.Call) and _is_constructor(expr):
        is_dict = isinstance(expr.func, cst.Name) and expr.func.value == "dict"
        for arg in expr.args:
            assert arg.keyword is not None
            key = ("key" if is_dict else "attr", arg.keyword.value)
            used.add(key)
            text = part(arg.value, key)
            if text is None:
                return None
            pieces.append(f"{arg.keyword.value}={text}")
        if sort_keys:
            pieces.sort()
        body = f"{facts.module.code_for_node(expr.func)}(" + ", ".join(pieces) + ")"
    else:
        return None
    wanted = {t[0] for t in targets}
    return body if wanted <= used else None


def literal_paths(facts: SourceFacts, scope: Scope, expr: cst.BaseExpression, depth: int = 4) -> list[Keys]:
    """The pytree paths of ``expr`` and of everything inside it that the source spells as a
    literal (tuples, lists, dicts, ``dict(k=...)`` and keyword-built named tuples or
    dataclasses, through local names assigned once), ``depth`` levels down."""
    seen: set[int] = set()
    while not isinstance(expr, (cst.Tuple, cst.List, cst.Dict, cst.Call)):
        value = follow_name(facts, scope, expr)
        if value is None or id(value) in seen:
            return [()]
        seen.add(id(value))
        expr = value
    children: list[tuple[PathKey, cst.BaseExpression]] = []
    if isinstance(expr, (cst.Tuple, cst.List)) and not any(isinstance(e, cst.StarredElement) for e in expr.elements):
        children = [(("index", i), e.value) for i, e in enumerate(expr.elements)]
    elif isinstance(expr, cst.Dict):
        for entry in expr.elements:
            found = _key_value(entry.key) if isinstance(entry, cst.DictElement) else None
            if found is None:
                return [()]
            children.append((("index", found) if isinstance(found, int) else ("key", found), entry.value))
    elif isinstance(expr, cst.Call) and _is_constructor(expr):
        is_dict = isinstance(expr.func, cst.Name) and expr.func.value == "dict"
        children = [
            (("key", arg.keyword.value) if is_dict else ("attr", arg.keyword.value), arg.value)
            for arg in expr.args
            if arg.keyword is not None
        ]
    paths: list[Keys] = [()]
    if depth:
        for path_key, child in children:
            paths += [(path_key, *rest) for rest in literal_paths(facts, scope, child, depth - 1)]
    return paths


def structure_mismatch(
    facts: SourceFacts,
    shardings: cst.BaseExpression,
    shardings_scope: Scope,
    value: cst.BaseExpression,
    value_scope: Scope,
    at: Keys = (),
) -> str | None:
    """Why ``shardings`` (an ``out_shardings`` tree) is not a pytree prefix of ``value`` (a
    returned expression), where the source shows both structures: a tuple's arity, a list for
    a tuple, a dict's keys, a named tuple's or dataclass's fields; None when it fits or the
    source does not show the returned structure (a call's result)."""
    shardings = _literal(facts, shardings_scope, shardings, binding=True)
    if not isinstance(shardings, (cst.Tuple, cst.List, cst.Dict, cst.Call)) or (
        isinstance(shardings, cst.Call) and not _is_constructor(shardings)
    ):
        return None  # a leaf: one sharding (or None) covers whatever is there
    value = _literal(facts, value_scope, value)
    where = f"at {format_output_path(at)}" if at else "for the result"
    ours = _shape(shardings)
    if ours is not None and _is_array(facts, value):
        return f"out_shardings {where} is {ours[0]}, but the function returns one array there"
    if not isinstance(value, (cst.Tuple, cst.List, cst.Dict, cst.Call)) or (
        isinstance(value, cst.Call) and not _is_constructor(value)
    ):
        return None  # the source does not show what is returned there
    theirs = _shape(value)
    if ours is None or theirs is None:
        return None
    if ours[0] != theirs[0]:
        return f"out_shardings {where} is {ours[0]}, but the function returns {theirs[0]} there"
    if set(ours[1]) != set(theirs[1]):
        return (
            f"out_shardings {where} has {', '.join(format_output_path((k,)) for k in ours[1]) or 'no entries'}, "
            f"but the function returns {', '.join(format_output_path((k,)) for k in theirs[1]) or 'none'} there"
        )
    for key, child in ours[1].items():
        why = structure_mismatch(facts, child, shardings_scope, theirs[1][key], value_scope, (*at, key))
        if why is not None:
            return why
    return None


_ARRAY_MODULES = ("jax.numpy.", "jax.lax.", "jax.nn.", "jax.random.", "numpy.")


def _is_array(facts: SourceFacts, expr: cst.BaseExpression) -> bool:
    """Arithmetic, or a call of ``jax.numpy``/``lax``/``nn``: one array, never a tree."""
    if isinstance(expr, cst.BinaryOperation):
        sequences = (cst.Tuple, cst.List)
        return not (isinstance(expr.left, sequences) or isinstance(expr.right, sequences))  # (a,) + rest
    if isinstance(expr, cst.UnaryOperation):
        return True
    if isinstance(expr, cst.Call):
        qualname = facts.aliases.qualify(expr.func) or ""
        return qualname.startswith(_ARRAY_MODULES) and "tree" not in qualname
    return False


def _literal(facts: SourceFacts, scope: Scope, expr: cst.BaseExpression, binding: bool = False) -> cst.BaseExpression:
    """``expr`` through local names assigned once (``binding``: through the scope chain, as a
    module-level ``out_shardings`` name is read)."""
    seen: set[int] = set()
    while isinstance(expr, cst.Name):
        if binding:
            found = facts.scope_chain_binding(expr.value, scope)
            value = found[0].value if found is not None else None
        else:
            value = follow_name(facts, scope, expr)
        if value is None or id(value) in seen:
            break
        seen.add(id(value))
        expr = value
    return expr


def _shape(expr: cst.BaseExpression) -> tuple[str, dict[PathKey, cst.BaseExpression]] | None:
    """(what the node is, its children by pytree key); None when the source cannot say (a
    starred element, ``**`` in a dict, a computed key)."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        if any(isinstance(e, cst.StarredElement) for e in expr.elements):
            return None
        kind = "a tuple" if isinstance(expr, cst.Tuple) else "a list"
        return f"{kind} of {len(expr.elements)}", {("index", i): e.value for i, e in enumerate(expr.elements)}
    if isinstance(expr, cst.Dict):
        children: dict[PathKey, cst.BaseExpression] = {}
        for entry in expr.elements:
            key = _key_value(entry.key) if isinstance(entry, cst.DictElement) else None
            if key is None:
                return None
            children[("index", key) if isinstance(key, int) else ("key", key)] = entry.value
        return "a dict", children
    assert isinstance(expr, cst.Call)
    name = expr.func.value if isinstance(expr.func, cst.Name) else getattr(expr.func, "attr", cst.Name("?")).value
    if name == "dict":
        return "a dict", {("key", a.keyword.value): a.value for a in expr.args if a.keyword is not None}
    return f"a {name}", {("attr", a.keyword.value): a.value for a in expr.args if a.keyword is not None}


def returned_values(function: FunctionInfo, lines: Sequence[int]) -> list[tuple[int, cst.BaseExpression]]:
    """(line, value) of the function's returns with a value, limited to those spanning one of
    ``lines`` if given (a diagnostic may point at the value's line, below ``return (``)."""
    return [
        (site.line, site.node.value)
        for site in function.returns
        if site.node.value is not None and (not lines or any(site.spans(line) for line in lines))
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


def _is_constructor(call: cst.Call) -> bool:
    """``dict(k=...)`` or ``Name(field=...)`` with a class-like name (a named tuple or
    dataclass built by keyword)."""
    name = (
        call.func.value
        if isinstance(call.func, cst.Name)
        else (call.func.attr.value if isinstance(call.func, cst.Attribute) else "")
    )
    return _is_plain_call(call) and bool(call.args) and (name == "dict" or name[:1].isupper())
