"""Put the lines a fix changed into the original text, and nothing else.

libcst prints an unchanged module back byte for byte, except at a few places: a file whose
lines end in a lone ``\\r`` loses its last one, and blank lines before a last line of only
spaces are dropped (``parse_module("x = 1\\n\\n  ").code == "x = 1\\n  "``). A fixed module's
print therefore differs from the file in places no fix touched. So the file is never
replaced by libcst's print of the fixed module: the print of the *unchanged* module is
compared with the print of the fixed one, and only the lines that differ in content are
taken from the fixed print; every other line is the original's, its line end included.

One blind spot changes what libcst parses: a form feed in a statement's indentation (a page
break, as older and Emacs-edited code has) is dropped with the whitespace before it, so its
print has lines the file does not, and a splice by content would take the wrong ones. The
fixer therefore gives libcst :func:`~offload_fixer.source.decoding.libcst_view`, the text with such indentation cut to what
follows its last form feed (how CPython's tokenizer counts it: a form feed resets the
column), and :func:`restore` puts the cut prefixes back around the edit. The view also spells
every identifier as Python reads it (NFKC); :func:`restore` spells the changed lines' names as
the file does.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from offload_fixer.source.decoding import LINE_END, form_feeds_cut, spelled_as_written, split_lines
from offload_fixer.static.pruning import BLANKED_LINE

_LARGE = 2000
"""Lines above which the diff lets popular lines (blank ones) not seed matches: without it,
difflib compares every blank line with every other, which is quadratic."""


def splice(original: str, reprinted: str, fixed: str) -> str:
    """``original`` with the lines where ``fixed`` differs from ``reprinted`` (both libcst
    prints: of the module parsed from ``original``, and of that module after the fix)
    replaced by ``fixed``'s lines. Lines equal in content keep their original bytes."""
    if fixed == reprinted:
        return original
    if original == reprinted:
        reprinted_lines = original_lines = split_lines(original)
        original_of: list[int | None] = list(range(len(original_lines)))
    else:
        original_lines, reprinted_lines = split_lines(original), split_lines(reprinted)
        if _blanked_from(original_lines, reprinted_lines):
            original_of = list(range(len(original_lines)))
        else:
            original_of = _match(original_lines, reprinted_lines)
    fixed_lines = split_lines(fixed)
    out: list[str] = []
    taken = 0
    """Original lines before this index are emitted (or replaced)."""

    def emit_through(index: int) -> None:
        nonlocal taken
        out.extend(original_lines[taken : index + 1])
        taken = max(taken, index + 1)

    for tag, i1, i2, j1, j2 in _opcodes(reprinted_lines, fixed_lines):
        if tag == "equal":
            for i in range(i1, i2):
                known = original_of[i]
                if known is None:
                    out.append(reprinted_lines[i])
                else:
                    emit_through(known)
            continue
        first = next((original_of[i] for i in range(i1, i2) if original_of[i] is not None), None)
        last = _last_known(original_of, i2 - 1, i1)
        if first is not None:
            emit_through(first - 1)  # with any line libcst dropped just above the edit
        else:
            before = _last_known(original_of, i1 - 1)
            if before is not None:
                emit_through(before)
        replacement = fixed_lines[j1:j2]
        if replacement and last is not None and _end(replacement[-1]) == _end(reprinted_lines[i2 - 1]):
            # the edited line keeps the original's line end where libcst printed another
            replacement[-1] = _body(replacement[-1]) + _end(original_lines[last])
        out.extend(replacement)
        if last is not None:
            taken = max(taken, last + 1)
    out.extend(original_lines[taken:])
    if out and original_lines and not _end(out[-1]) and _end(original_lines[-1]):
        out[-1] += _end(original_lines[-1])  # a line added after the last one: the file still ends a line
    return "".join(out)


def _blanked_from(original: Sequence[str], reprinted: Sequence[str]) -> bool:
    """Whether ``reprinted`` is ``original`` with some lines made comments of their own, as a
    fix planner's excerpt blanks the test methods it does not need
    (:data:`~offload_fixer.static.pruning.BLANKED_LINE`): then each line is its own original,
    and the blanked ones keep their text."""
    return len(original) == len(reprinted) and all(
        old == new or new.lstrip(" \t").startswith(BLANKED_LINE) for old, new in zip(original, reprinted)
    )


def _match(original: Sequence[str], reprinted: Sequence[str]) -> list[int | None]:
    """For each reprinted line, the original line it prints (same content), if any."""
    found: list[int | None] = [None] * len(reprinted)
    for tag, i1, i2, j1, _j2 in _opcodes(original, reprinted):
        if tag == "equal":
            for offset in range(i2 - i1):
                found[j1 + offset] = i1 + offset
    return found


def _opcodes(a: Sequence[str], b: Sequence[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib opcodes comparing lines by content (not their ends), common ends trimmed first."""
    ka, kb = [_body(line) for line in a], [_body(line) for line in b]
    start = 0
    limit = min(len(ka), len(kb))
    while start < limit and ka[start] == kb[start]:
        start += 1
    stop = 0
    while stop < limit - start and ka[len(ka) - 1 - stop] == kb[len(kb) - 1 - stop]:
        stop += 1
    mid_a, mid_b = ka[start : len(ka) - stop], kb[start : len(kb) - stop]
    ops: list[tuple[str, int, int, int, int]] = []
    if start:
        ops.append(("equal", 0, start, 0, start))
    if mid_a or mid_b:
        large = max(len(mid_a), len(mid_b)) > _LARGE
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=large).get_opcodes():
            ops.append((tag, i1 + start, i2 + start, j1 + start, j2 + start))
    if stop:
        ops.append(("equal", len(ka) - stop, len(ka), len(kb) - stop, len(kb)))
    return ops


def _last_known(original_of: Sequence[int | None], index: int, floor: int = 0) -> int | None:
    """The original line of the nearest reprinted line at or before ``index`` that has one."""
    while index >= floor:
        if original_of[index] is not None:
            return original_of[index]
        index -= 1
    return None


def _body(line: str) -> str:
    match = LINE_END.search(line, max(len(line) - 2, 0))
    return line[: match.start()] if match else line


def _end(line: str) -> str:
    return line[len(_body(line)) :]


def restore(original: str, view: str, fixed_view: str) -> str:
    """``fixed_view``, an edit of ``view`` (``libcst_view`` of ``original``), as the same
    edit of ``original``: unchanged lines are the original's, a changed line keeps the prefix
    the view cut (the first line of a statement a fix replaced by several), and the names on
    changed lines are spelled as ``original`` spells them (:func:`spelled_as_written`)."""
    if fixed_view == view:
        return original
    if view == original:
        return fixed_view
    old, cut, fixed = split_lines(original), split_lines(view), split_lines(fixed_view)
    written = spelled_as_written(fixed_view, original)
    uncut = split_lines(form_feeds_cut(original)) if "\f" in original else old
    out: list[str] = []
    for tag, i1, i2, j1, j2 in _opcodes(cut, fixed):
        if tag == "equal":
            out.extend(old[i1:i2])
            continue
        replacement = written[j1:j2]
        pairs = range(i2 - i1) if i2 - i1 == j2 - j1 else range(min(1, i2 - i1, j2 - j1))
        for offset in pairs:
            prefix = old[i1 + offset][: len(old[i1 + offset]) - len(uncut[i1 + offset])]
            replacement[offset] = prefix + replacement[offset]
        out.extend(replacement)
    return "".join(out)
