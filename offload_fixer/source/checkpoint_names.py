"""The checkpoint names a remat offload policy offloads and those ``checkpoint_name`` tags, as
the source spells them: for the static check (OFL1211, a name no tag matches) and the codemod
that respells such a name as the tag it was meant to be; and which tag a name misspells, for
them and for ``run``'s finding. libcst is imported where a call is read, so the rule that
words ``run``'s finding does not load it."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import libcst as cst

OFFLOADED_NAMES_KEYWORD = "names_which_can_be_offloaded"
NAME_POLICIES = {"save_and_offload_only_these_names": 1}
"""Offload policies that name what they offload, and the position of those names."""
TAGGING = "checkpoint_name"
TAG_POSITION = 1
"""``checkpoint_name(x, name)``: where the name is passed by position."""
CLOSE = 0.6
"""How alike a name and a tag must be to be taken for a misspelling (``difflib``'s ratio)."""


def offloaded_names(call: cst.Call) -> list[cst.SimpleString] | None:
    """The string literals of the names an offload policy call offloads, or ``None`` where the
    call is no such policy or its names are not all literals in a list or tuple."""
    import libcst as cst

    from offload_fixer.source.bindings import last_name

    position = NAME_POLICIES.get(last_name(call.func) or "")
    if position is None:
        return None
    for index, arg in enumerate(call.args):
        named = arg.keyword is not None and arg.keyword.value == OFFLOADED_NAMES_KEYWORD
        if named or (arg.keyword is None and not arg.star and index == position):
            value = arg.value
            if not isinstance(value, (cst.List, cst.Tuple)):
                return None
            literals = [element.value for element in value.elements]
            if not all(isinstance(literal, cst.SimpleString) for literal in literals):
                return None
            return [literal for literal in literals if isinstance(literal, cst.SimpleString)]
    return None


def tag_of(call: cst.Call) -> cst.BaseExpression | None:
    """The name a ``checkpoint_name`` call tags its value with (any expression), or ``None``
    where the call is not ``checkpoint_name``."""
    from offload_fixer.source.bindings import last_name

    if last_name(call.func) != TAGGING:
        return None
    for index, arg in enumerate(call.args):
        if (arg.keyword is not None and arg.keyword.value == "name") or (
            arg.keyword is None and not arg.star and index == TAG_POSITION
        ):
            return arg.value
    return None


def close_tags(name: str, tags: list[str] | tuple[str, ...]) -> list[str]:
    """The tags ``name`` may be a misspelling of, the closest first."""
    return difflib.get_close_matches(name, list(dict.fromkeys(tags)), n=3, cutoff=CLOSE)
