"""Which Python's syntax a file is written in, and which grammar judges it.

The setting is ruff's: ``target-version = "py312"``, read from ``requires-python`` (the
lowest version it admits) where it is not set. CPython's compiler judges a file written for
this interpreter's Python or an older one (its messages are the ones users know; for an older
one its parser is told the target's version, so newer syntax it knows is refused); a file
written for a newer Python than the one offload-fixer runs under is judged by libcst's grammar,
which reads the syntax of every Python from 3.0 to 3.14 (PEP 695 type parameters, PEP 701
f-strings), so that it is analysed rather than refused. With neither setting, any version's
syntax is accepted.
"""

from __future__ import annotations

import ast
import re
import sys

OLDEST, NEWEST = (3, 7), (3, 14)
"""The versions ``target-version`` takes (ruff's range); libcst reads all of them."""
TARGET_VERSIONS = tuple(f"py3{minor}" for minor in range(OLDEST[1], NEWEST[1] + 1))
_REQUIREMENT = re.compile(r"^\s*(>=|~=|==|>)\s*3\.(\d+)(?:\.[\d*]+)?\s*$")


def parse_target_version(text: str) -> tuple[int, int]:
    """``"py312"`` -> ``(3, 12)``; :class:`ValueError` for anything else."""
    if text not in TARGET_VERSIONS:
        raise ValueError(f"expected one of {', '.join(TARGET_VERSIONS)}, got {text!r}")
    return 3, int(text[3:])


def from_requires_python(spec: str) -> str | None:
    """The ``target-version`` a ``requires-python`` specifier implies: its lowest admitted
    version (``">=3.10"``, ``"~=3.10"``, ``">3.10"`` and ``">=3.10,<4"`` -> ``py310``); None
    when it names no lower bound."""
    floors = []
    for clause in spec.split(","):
        match = _REQUIREMENT.match(clause)
        if match:
            floors.append(min(max(int(match.group(2)), OLDEST[1]), NEWEST[1]))
    return f"py3{max(floors)}" if floors else None


def judged_by_cpython(target: tuple[int, int] | None) -> bool:
    """Whether this interpreter's compiler knows the target's grammar (its Python is at least
    as new); otherwise libcst's grammar decides what is Python."""
    return target is not None and target <= sys.version_info[:2]


def grammar_of(target: tuple[int, int] | None) -> tuple[int, int] | None:
    """The ``feature_version`` to parse a file written for ``target`` with, where this
    interpreter's Python is newer than the target: CPython's parser then refuses the newer
    syntax it checks for (``match`` 3.10, ``except*`` 3.11, type parameters and ``type``
    aliases 3.12, ...; not PEP 701's f-strings, which it does not check), as ruff does for
    ``target-version``. ``None``: this interpreter's own grammar is the target's, or older."""
    return target if target is not None and target < sys.version_info[:2] else None


def older_target_message(message: str, target: tuple[int, int]) -> str:
    """CPython's message for syntax newer than the file's target, and where the target comes from."""
    return (
        f"{message}; the file is written for Python {target[0]}.{target[1]} (its `target-version`, or its "
        "project's `requires-python`)"
    )


def construct_start(text: str, error: SyntaxError) -> tuple[int, int]:
    """Where the construct an older grammar refused starts (1-based line and column):
    CPython's parser reports the first token after it (a ``match`` statement's error is on the
    line below its last case), so this is the outermost node ending last before that token."""
    where = (error.lineno or 1, (error.offset or 1) - 1)
    best: tuple[tuple[int, int], tuple[int, int]] | None = None
    for node in ast.walk(ast.parse(text)):
        end_line, end_col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
        if end_line is None or end_col is None or (end_line, end_col) > where:
            continue
        end, start = (end_line, end_col), (node.lineno, node.col_offset)  # type: ignore[attr-defined]
        if best is None or end > best[0] or (end == best[0] and start < best[1]):
            best = end, start
    if best is None:
        return where[0], where[1] + 1
    return best[1][0], best[1][1] + 1


def parses(text: str) -> bool:
    """Whether this interpreter's own grammar reads ``text``."""
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def newer_syntax(text: str) -> bool:
    """Whether a text CPython refuses is still Python to libcst's grammar, which reads every
    version's syntax: then it is written for a newer Python than this interpreter's."""
    import libcst as cst

    try:
        cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError, MemoryError, ValueError):
        return False
    return True


def only_newer_syntax(error: SyntaxError, text: str) -> bool:
    """Whether CPython refuses ``text`` only for syntax newer than this interpreter's: its
    parser refuses it (not its compiler: ``nonlocal x`` without a binding, ``return`` outside
    a function are errors in every version), not for one of its limits (``too many nested
    parentheses``), and libcst's grammar reads it."""
    if (error.msg or "").startswith("too many"):
        return False
    try:
        ast.parse(text)
    except SyntaxError:
        return newer_syntax(text)
    except (ValueError, RecursionError, MemoryError):
        return False
    return False


def newer_syntax_message(message: str, target: tuple[int, int]) -> str:
    """CPython's message, and why it is the verdict: the file is written for a Python this
    interpreter's grammar covers, and the syntax is a newer one's."""
    return (
        f"{message} for Python {target[0]}.{target[1]} (the file's `target-version`, or its project's "
        "`requires-python`): this is a newer Python's syntax"
    )


def compile_any_version(source: str | bytes, path: str) -> None:
    """``compile`` for a text CPython must be able to run, where syntax newer than this
    interpreter's, which libcst reads, counts as Python (the fixer's check of what it wrote)."""
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        text = source if isinstance(source, str) else source.decode("utf-8", errors="replace")
        if not only_newer_syntax(exc, text):
            raise
