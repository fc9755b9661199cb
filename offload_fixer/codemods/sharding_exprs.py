"""Reading and rewriting the memory kind of a sharding expression in source.

A memory kind is visible in source as ``memory_kind="..."`` on a sharding constructor,
``s.with_memory_kind("...")``, ``TransferToMemoryKind("...")`` or ``jax.memory.Space.X``.
Rewrites keep the expression and change only that literal where there is one, so the
partition spec and mesh the user chose are kept.
"""

from __future__ import annotations

import libcst as cst

from offload_fixer.codemods.source_facts import (
    DEVICE_PUT,
    SHARDING_CONSTRUCTORS,
    TRANSFER_TO_MEMORY_KIND,
    Aliases,
)
from offload_fixer.jax_compat import MEMORY_SPACE_APIS
from offload_fixer.model import DEVICE, PINNED_HOST
from offload_fixer.model import DEVICE_KINDS as DEVICE_KINDS  # the codemods read them from here
from offload_fixer.model import HOST_KINDS as HOST_KINDS
from offload_fixer.source.bindings import dotted_name, last_name

SPACE_ENUMS = frozenset(api.enum.rsplit(".", 1)[-1] for api in MEMORY_SPACE_APIS)
"""``Space``: the last name of every spelling of JAX's memory-space enum."""
SPACE_MEMBERS = {
    **{api.device_member: DEVICE for api in MEMORY_SPACE_APIS},
    **{api.host_member: PINNED_HOST for api in MEMORY_SPACE_APIS},
}
"""``Device`` and ``Host`` (every spelling of them): the memory kinds the members stand for."""
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.SimpleString, cst.ConcatenatedString)


def string_value(expr: cst.BaseExpression | None) -> str | None:
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def memory_kind_literal(expr: cst.BaseExpression) -> str | None:
    """The memory kind an expression spells out, or None when it does not say."""
    if is_memory_space(expr):
        return SPACE_MEMBERS.get(last_name(expr) or "")
    if not isinstance(expr, cst.Call):
        return None
    kind_arg = keyword(expr, "memory_kind")
    if kind_arg is not None:
        return string_value(kind_arg.value)
    name = last_name(expr.func)
    if name in ("with_memory_kind", TRANSFER_TO_MEMORY_KIND) and expr.args:
        return string_value(expr.args[0].value)
    if name == "Format":
        inner = _format_sharding(expr)
        return memory_kind_literal(inner.value) if inner is not None else None
    return None


def is_memory_space(expr: cst.BaseExpression) -> bool:
    parts = (dotted_name(expr) or "").split(".")
    return len(parts) >= 2 and parts[-2] in SPACE_ENUMS


def is_transfer_to_memory_kind(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and last_name(expr.func) == TRANSFER_TO_MEMORY_KIND


def is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def device_put_destination(call: cst.Call) -> cst.BaseExpression | None:
    """The second argument of ``device_put(x, dst)`` (positional or ``device=``)."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if len(positional) >= 2:
        return positional[1].value
    found = keyword(call, "device")
    return found.value if found is not None else None


def is_device_move(expr: cst.BaseExpression, aliases: Aliases) -> bool:
    """``device_put(x, <something that says device memory>)``: already moved back."""
    if not (isinstance(expr, cst.Call) and aliases.qualify(expr.func) == DEVICE_PUT):
        return False
    destination = device_put_destination(expr)
    return destination is not None and memory_kind_literal(destination) in DEVICE_KINDS


def moved_value(expr: cst.Call) -> cst.BaseExpression | None:
    positional = [a for a in expr.args if a.keyword is None and not a.star]
    return positional[0].value if positional else None


def string_literal(value: str, quote: str, like: cst.BaseExpression | None = None) -> cst.SimpleString:
    """A string literal, in the quotes of ``like`` when it is a simple string."""
    if isinstance(like, cst.SimpleString):
        return cst.SimpleString(f"{like.prefix}{like.quote}{value}{like.quote}")
    return cst.SimpleString(f"{quote}{value}{quote}")


def with_memory_kind(expr: cst.BaseExpression, kind: str, quote: str) -> cst.BaseExpression | None:
    """``expr`` as a sharding of memory kind ``kind``; None if it cannot be one (``None``,
    a ``jax.memory.Space``)."""
    if is_none(expr) or is_memory_space(expr):
        return None
    if isinstance(expr, cst.Call):
        kind_arg = keyword(expr, "memory_kind")
        if kind_arg is not None:
            return _replace_arg(expr, kind_arg, string_literal(kind, quote, kind_arg.value))
        name = last_name(expr.func)
        if name in ("with_memory_kind", TRANSFER_TO_MEMORY_KIND) and expr.args and expr.args[0].keyword is None:
            first = expr.args[0]
            return _replace_arg(expr, first, string_literal(kind, quote, first.value))
        if name == "Format":
            inner = _format_sharding(expr)
            if inner is None:
                return None
            changed = with_memory_kind(inner.value, kind, quote)
            return _replace_arg(expr, inner, changed) if changed is not None else None
        if name in SHARDING_CONSTRUCTORS and not any(a.star for a in expr.args):
            new_arg = cst.Arg(
                keyword=cst.Name("memory_kind"),
                value=string_literal(kind, quote),
                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
            )
            return append_arg(expr, new_arg)
    receiver = (
        expr
        if isinstance(expr, _ATOMS) or expr.lpar
        else expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    )
    return cst.Call(
        func=cst.Attribute(value=receiver, attr=cst.Name("with_memory_kind")),
        args=[cst.Arg(string_literal(kind, quote))],
    )


def _format_sharding(call: cst.Call) -> cst.Arg | None:
    """The sharding argument of ``Format(layout, sharding)``."""
    found = keyword(call, "sharding")
    if found is not None:
        return found
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[1] if len(positional) >= 2 else None


def _replace_arg(call: cst.Call, old: cst.Arg, value: cst.BaseExpression) -> cst.Call:
    return call.with_changes(args=[a.with_changes(value=value) if a is old else a for a in call.args])


def append_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """Add ``arg`` after the last argument, keeping a multi-line call multi-line."""
    args = list(call.args)
    if not args:
        return call.with_changes(args=[arg])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # A trailing comma: the new argument takes it; the old one gets a separator that
        # starts the next line like the first argument does.
        separator = call.whitespace_before_args
        if not isinstance(separator, cst.ParenthesizedWhitespace):
            separator = cst.SimpleWhitespace(" ")
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=separator))
        args.append(arg.with_changes(comma=last.comma))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(arg)
    return call.with_changes(args=args)
