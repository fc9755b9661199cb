"""The ``ast`` of a large class statement after an edit inside one of its members, for a
document's outline (:func:`.outline.outline`): the members the edit did not touch are kept,
and only those it touched are parsed again, under a stand-in header.

An editor's change to a test class of 7,000 lines (JAX's ``ShardingInTypesTest``) used to
parse all of it again with ``ast``: 90 ms of every answer. Here the lines from the member
before the change to the member after it are parsed alone as ``class _:`` followed by those
lines, which is exact where the result is a body at the class's own indentation: a member
starts a line at that indentation with no bracket, string or continuation open, so what
comes before it cannot change how it parses, and a body that parses alone between two such
lines parses the same in the class. The members after the change are moved down (or up) by
the lines it added (or removed), in place: they are now where the new text has them. The
class statement is a copy with the new body list. What the check derives from a member's
``ast`` is kept by its node (:mod:`.incremental`, :mod:`.statement_reads`, :mod:`.pruning`),
so only the members parsed again are walked again. Anything else (a change in the header, a
line that leaves the class, another indentation) is left to the caller, which parses the
whole chunk again.
"""

from __future__ import annotations

import ast
import bisect
import copy
from collections.abc import Sequence

from offload_fixer.source import type_parameters
from offload_fixer.source.lines import NEWLINE, first_line, lines_before

MEMBERS_CHARS = 8192
"""A class chunk at least this long is updated member by member."""


def class_after(
    group: Sequence[ast.stmt],
    old: str,
    new: str,
    changed: tuple[int, int],
    grammar: tuple[int, int] | None,
    newer_syntax: bool,
) -> list[ast.stmt] | None:
    """The statements of chunk ``new``, the edited version of chunk ``old`` whose statements
    are ``group`` (one class statement), where the edit is inside the class's body; None
    where it is not, or the class cannot be updated member by member. ``changed``: where the
    edit is in ``old`` (character offsets: its first changed character, and the first one
    after it that is unchanged)."""
    if len(group) != 1 or type(group[0]) is not ast.ClassDef or len(old) < MEMBERS_CHARS:
        return None
    cls = group[0]
    starts = _line_starts(old)
    base = lines_before(cls, old)
    members = _member_lines(cls.body, base, len(starts))
    if members is None:
        return None
    indent = cls.body[0].col_offset
    first_changed, after_changed = changed
    line_before_change = bisect.bisect_right(starts, max(first_changed - 1, 0))  # 1-based
    last_changed_line = bisect.bisect_right(starts, max(after_changed - 1, first_changed))
    firsts = [first for first, _, _ in members]
    i = bisect.bisect_right(firsts, line_before_change) - 1
    if i < 0:
        return None  # the change reaches the header
    k = bisect.bisect_right(firsts, last_changed_line)
    region_start = starts[firsts[i] - 1]
    region_end = starts[firsts[k] - 1] if k < len(members) else len(old)
    shift = len(new) - len(old)
    if new[:region_start] != old[:region_start] or new[region_end + shift :] != old[region_end:]:
        return None
    region = new[region_start : region_end + shift]
    try:
        stand_in = type_parameters.parse(f"class _:\n{region}", grammar, newer_syntax)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(stand_in.body) != 1 or type(stand_in.body[0]) is not ast.ClassDef:
        return None
    parsed = stand_in.body[0].body
    if not _at_indentation(parsed, indent):
        return None
    if k == len(members) and (parsed[-1].end_lineno or 0) != 1 + _count_lines(region) + (not _ends_line(region)):
        return None  # lines after the class's last statement: the next chunk's, as a cut says
    added = _count_lines(region) - _count_lines(old, region_start, region_end)
    before = [s for _, _, statements in members[:i] for s in statements]
    after = [s for _, _, statements in members[k:] for s in statements]
    region_line = firsts[i] + base  # the first region line's number in the class's numbering
    for statement in parsed:
        ast.increment_lineno(statement, region_line - 2)
    if added:
        for statement in after:
            ast.increment_lineno(statement, added)
    updated = copy.copy(cls)
    updated.body = [*before, *parsed, *after]
    updated.end_lineno = updated.body[-1].end_lineno
    updated.end_col_offset = updated.body[-1].end_col_offset
    return [updated]


def _line_starts(text: str) -> list[int]:
    return [0, *(match.end() for match in NEWLINE.finditer(text))]


def _count_lines(text: str, start: int = 0, end: int | None = None) -> int:
    return sum(1 for _ in NEWLINE.finditer(text, start, len(text) if end is None else end))


def _ends_line(text: str) -> bool:
    return text.endswith(("\n", "\r"))


def _member_lines(body: Sequence[ast.stmt], base: int, lines: int) -> list[tuple[int, int, list[ast.stmt]]] | None:
    """(first line, last line, statements) of each member, counted in the chunk of ``lines``
    lines, statements sharing a line together; None where one is not within them."""
    members: list[tuple[int, int, list[ast.stmt]]] = []
    for statement in body:
        first, last = first_line(statement) - base, (statement.end_lineno or statement.lineno) - base
        if not 1 <= first <= last <= lines:
            return None
        if members and first <= members[-1][1]:
            members[-1] = (members[-1][0], max(members[-1][1], last), [*members[-1][2], statement])
        else:
            members.append((first, last, [statement]))
    return members


def _at_indentation(statements: Sequence[ast.stmt], indent: int) -> bool:
    """Whether each statement starting a line does so at the class body's indentation."""
    end = 0
    for statement in statements:
        if first_line(statement) > end and statement.col_offset != indent:
            return False
        end = max(end, statement.end_lineno or statement.lineno)
    return bool(statements)
