"""Seeded mutations of real programs: the same code, written the ways people write it.

Each mutation takes a text and a ``random.Random`` and returns a text that means the same
to Python (or ``None`` where it does not apply). Line ends, the BOM and the coding cookie
are applied last, to the bytes, since they are how a file is stored rather than what it says.
"""

from __future__ import annotations

import ast
import io
import random
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass

TextMutation = Callable[[str, random.Random], "str | None"]


# ---------------------------------------------------------------------------------------
# Text: what the code says
def parenthesise_returns(text: str, rng: random.Random) -> str | None:
    """``return a, b`` -> ``return (a, b)`` on some single-line returns."""
    lines = text.splitlines(keepends=True)
    candidates = [i for i, line in enumerate(lines) if _simple_return(line)]
    if not candidates:
        return None
    for i in rng.sample(candidates, max(1, len(candidates) // 2)):
        indent, value, comment, end = _split_return(lines[i])
        lines[i] = f"{indent}return ({value}){comment}{end}"
    return "".join(lines)


def multiline_returns(text: str, rng: random.Random) -> str | None:
    """``return a, b`` -> ``return (\\n    a,\\n    b,\\n)``, and ``return (`` with the value
    starting on the next line."""
    lines = text.splitlines(keepends=True)
    candidates = [i for i, line in enumerate(lines) if _simple_return(line)]
    if not candidates:
        return None
    i = rng.choice(candidates)
    indent, value, comment, _end = _split_return(lines[i])
    parts = _top_level_parts(value)
    if parts is None:
        return None
    inner = indent + "    "
    body = "".join(f"{inner}{part.strip()},\n" for part in parts) if len(parts) > 1 else f"{inner}{value.strip()}\n"
    lines[i] = f"{indent}return ({comment}\n{body}{indent})\n"
    return "".join(lines)


def alias_jax(text: str, rng: random.Random) -> str | None:
    """``import jax`` -> ``import jax as jx`` (every ``jax.`` use renamed), or ``jax.numpy``
    imported under another name."""
    if not re.search(r"^import jax$", text, re.M):
        return None
    alias = rng.choice(["jx", "J", "jax_"])
    if re.search(rf"\b{alias}\b", text):
        return None
    renamed = _rename_names(text, {"jax": alias})
    if renamed is None:
        return None
    return re.sub(r"^import jax$", f"import jax as {alias}", renamed, count=1, flags=re.M)


def alias_numpy(text: str, rng: random.Random) -> str | None:
    if "import jax.numpy as jnp" not in text or re.search(r"\bnp_\b", text):
        return None
    renamed = _rename_names(text, {"jnp": "np_"})
    return None if renamed is None else renamed.replace("import jax.numpy as np_", "from jax import numpy as np_")


def add_decorator(text: str, rng: random.Random) -> str | None:
    """An identity decorator above some jitted functions (below ``@jax.jit``, so the jit
    still sees the function), defined at the top."""
    lines = text.splitlines(keepends=True)
    sites = [i for i, line in enumerate(lines) if line.startswith("def ") and i and lines[i - 1].startswith("@")]
    if not sites:
        return None
    for i in sorted(rng.sample(sites, max(1, len(sites) // 2)), reverse=True):
        lines.insert(i, "@_identity\n")
    header = "\n\ndef _identity(function):\n    return function\n\n"
    return _after_imports("".join(lines), header)


def add_comments(text: str, rng: random.Random) -> str | None:
    """Comments at the end of some code lines and on lines of their own."""
    tree = _parse(text)
    if tree is None:
        return None
    lines = text.splitlines(keepends=True)
    safe = sorted(_lines_ending_statements(tree, text))
    if not safe:
        return None
    for number in sorted(rng.sample(safe, max(1, len(safe) // 4)), reverse=True):
        line = lines[number - 1]
        body = line.rstrip("\r\n")
        lines[number - 1] = f"{body}  # note {rng.randint(0, 999)}{line[len(body) :]}"
    return "".join(lines)


def reindent(text: str, rng: random.Random) -> str | None:
    """Blocks indented with tabs, or two or three spaces per level."""
    unit = rng.choice(["\t", "  ", "   "])
    tokens = _tokens(text)
    if tokens is None:
        return None
    rows = _indented_rows(tokens)
    lines = text.splitlines(keepends=True)
    out = []
    for number, line in enumerate(lines, start=1):
        depth = rows.get(number)
        if depth is not None:
            stripped = line.lstrip(" ")
            if len(line) - len(stripped) == 4 * depth:
                line = unit * depth + stripped
            else:
                return None
        out.append(line)
    return "".join(out)


def blank_lines(text: str, rng: random.Random) -> str | None:
    """More blank lines between top-level statements, some holding only spaces."""
    lines = text.splitlines(keepends=True)
    blanks = [i for i, line in enumerate(lines) if not line.strip()]
    if not blanks:
        return None
    for i in sorted(rng.sample(blanks, max(1, len(blanks) // 3)), reverse=True):
        lines.insert(i, rng.choice(["\n", "    \n", "\t\n"]))
    return "".join(lines)


def trailing_layout(text: str, rng: random.Random) -> str | None:
    """How the file ends: no final newline, blank lines then a line of only spaces, or a
    final comment."""
    body = text.rstrip("\n")
    return body + rng.choice(["", "\n\n  ", "\n\n\n   \n", "\n# end\n", "\n\n# end"])


PAGE_BREAKS = ("\f", "\f\f", " \f", "\t\f", "\f \f")
"""Whitespace before a statement's indentation that ends in a form feed: CPython's tokenizer
resets the column at each form feed, so the statement means the same; libcst drops it."""


def form_feeds(text: str, rng: random.Random) -> str | None:
    """Page breaks (``\\f``, as older and Emacs-edited code has) at the start of some statement
    lines (a ``def``, a decorator, a body line, at any depth) and on blank lines of their own."""
    tokens = _tokens(text)
    if tokens is None:
        return None
    starts = sorted(_statement_rows(tokens))
    if not starts:
        return None
    lines = text.splitlines(keepends=True)
    defs = [n for n in starts if lines[n - 1].lstrip().startswith(("def ", "@", "class "))]
    chosen = set(rng.sample(starts, max(1, len(starts) // 6))) | set(rng.sample(defs, min(len(defs), 2)))
    for number in sorted(chosen, reverse=True):
        lines[number - 1] = rng.choice(PAGE_BREAKS) + lines[number - 1]
        if rng.random() < 0.2 and not lines[number - 1].lstrip(" \t\f").startswith(("@", "def", "class")):
            continue
        if rng.random() < 0.3 and number > 1 and not lines[number - 2].strip(" \t\f\r\n"):
            lines[number - 2] = "\f" + lines[number - 2]  # a page break alone on the blank line above
    return "".join(lines)


TEXT_MUTATIONS: dict[str, TextMutation] = {
    "form-feeds": form_feeds,
    "parenthesised-returns": parenthesise_returns,
    "multiline-returns": multiline_returns,
    "alias-jax": alias_jax,
    "alias-numpy": alias_numpy,
    "decorator": add_decorator,
    "comments": add_comments,
    "indentation": reindent,
    "blank-lines": blank_lines,
    "trailing-layout": trailing_layout,
}


# ---------------------------------------------------------------------------------------
# Bytes: how the file is stored
@dataclass(frozen=True)
class Storage:
    newline: str = "lf"
    """``lf``, ``crlf``, ``cr`` or ``mixed``."""
    bom: bool = False
    cookie: str | None = None
    """``utf-8`` or ``latin-1``: a PEP 263 line first (latin-1 adds a non-ASCII comment)."""

    @property
    def label(self) -> str:
        parts = [self.newline]
        if self.bom:
            parts.append("bom")
        if self.cookie:
            parts.append(f"cookie-{self.cookie}")
        return "+".join(parts)


def random_storage(rng: random.Random) -> Storage:
    newline = rng.choice(["lf", "lf", "crlf", "cr", "mixed"])
    cookie = rng.choice([None, None, "utf-8", "latin-1"])
    bom = cookie != "latin-1" and rng.random() < 0.25
    return Storage(newline, bom, cookie)


def store(text: str, storage: Storage, rng: random.Random) -> bytes:
    if storage.cookie:
        extra = "# caf\u00e9 cr\u00e8me\n" if storage.cookie == "latin-1" else ""
        text = f"# -*- coding: {storage.cookie} -*-\n" + extra + text
    if storage.newline == "crlf":
        text = text.replace("\n", "\r\n")
    elif storage.newline == "cr":
        text = text.replace("\n", "\r")
    elif storage.newline == "mixed":
        lines = text.split("\n")
        text = "".join(line + rng.choice(["\n", "\r\n"]) for line in lines[:-1]) + lines[-1]
    data = text.encode(storage.cookie or "utf-8")
    return (b"\xef\xbb\xbf" + data) if storage.bom else data


# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    source: str
    """The file it was made from (repository-relative)."""
    mutations: tuple[str, ...]
    storage: Storage
    data: bytes
    jax_version: str
    strategy: str

    @property
    def label(self) -> str:
        return (
            f"{self.source} [{', '.join(self.mutations) or 'as written'}; {self.storage.label}; "
            f"jax {self.jax_version}; {self.strategy}]"
        )


def make_variant(source: str, text: str, rng: random.Random, jax_version: str, strategy: str) -> Variant:
    """Up to four text mutations that apply (each must leave valid Python), then a storage."""
    names = rng.sample(sorted(TEXT_MUTATIONS), rng.randint(0, 4))
    applied = []
    for name in names:
        mutated = TEXT_MUTATIONS[name](text, rng)
        if mutated is not None and mutated != text and _parse(mutated) is not None:
            text, applied = mutated, applied + [name]
    storage = random_storage(rng)
    return Variant(source, tuple(applied), storage, store(text, storage, rng), jax_version, strategy)


# ---------------------------------------------------------------------------------------
# Helpers
_RETURN = re.compile(r"^(?P<indent>[ \t]+)return (?P<value>[^#\n]+?)(?P<comment>\s*#[^\n]*)?(?P<end>\n?)$")


def _simple_return(line: str) -> bool:
    match = _RETURN.match(line)
    if not match:
        return False
    value = match.group("value")
    return (
        value.count("(") == value.count(")")
        and value.count("[") == value.count("]")
        and value.count("{") == value.count("}")
        and not value.rstrip().endswith(("\\", ","))
        and "'" not in value
        and '"' not in value
    )


def _split_return(line: str) -> tuple[str, str, str, str]:
    match = _RETURN.match(line)
    assert match is not None
    return match.group("indent"), match.group("value").rstrip(), match.group("comment") or "", match.group("end")


def _top_level_parts(value: str) -> list[str] | None:
    depth, start, parts = 0, 0, []
    for i, ch in enumerate(value):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(value[start:i])
            start = i + 1
    parts.append(value[start:])
    parts = [p for p in parts if p.strip()]
    return parts or None


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _tokens(text: str) -> list[tokenize.TokenInfo] | None:
    try:
        return list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return None


def _indented_rows(tokens: list[tokenize.TokenInfo]) -> dict[int, int]:
    """Line number -> block depth, for lines that start a logical line inside a block."""
    depth = 0
    rows: dict[int, int] = {}
    at_line_start = True
    for token in tokens:
        if token.type == tokenize.INDENT:
            depth += 1
        elif token.type == tokenize.DEDENT:
            depth -= 1
        elif token.type in (tokenize.NEWLINE, tokenize.NL):
            at_line_start = True
            continue
        elif token.type == tokenize.COMMENT:
            continue
        if at_line_start and token.type not in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER) and depth:
            rows[token.start[0]] = depth
            at_line_start = False
        elif at_line_start and token.type not in (tokenize.INDENT, tokenize.DEDENT):
            at_line_start = False
    return rows


def _statement_rows(tokens: list[tokenize.TokenInfo]) -> set[int]:
    """Lines that start a logical line, at any depth (not inside brackets or strings)."""
    rows: set[int] = set()
    at_line_start = True
    depth = 0
    for token in tokens:
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        if token.type in (tokenize.NEWLINE, tokenize.NL):
            at_line_start = depth == 0
        elif token.type in (tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        elif at_line_start:
            rows.add(token.start[0])
            at_line_start = False
    return rows


def _lines_ending_statements(tree: ast.Module, text: str) -> set[int]:
    """Last lines of simple statements that are not inside a string (a comment fits there)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.While, ast.With, ast.Try)
        ):
            found.add(node.end_lineno)
    lines = text.splitlines()
    return {
        n for n in found if n <= len(lines) and "#" not in lines[n - 1] and not lines[n - 1].rstrip().endswith("\\")
    }


def _rename_names(text: str, names: dict[str, str]) -> str | None:
    """Rename NAME tokens (not attributes, strings or comments)."""
    tokens = _tokens(text)
    if tokens is None:
        return None
    lines = text.splitlines(keepends=True)
    edits = []
    previous = None
    in_import = False
    logical_start = True
    for token in tokens:
        if logical_start and token.type == tokenize.NAME:
            in_import = token.string in ("import", "from")
        if token.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            logical_start = token.type == tokenize.NEWLINE
        if (
            token.type == tokenize.NAME
            and token.string in names
            and not in_import
            and not (previous is not None and previous.string == ".")
        ):
            edits.append((token.start, token.end, names[token.string]))
        if token.type not in (tokenize.NL, tokenize.COMMENT):
            previous = token
    for (row, col), (_, end_col), new in reversed(edits):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[end_col:]
    return "".join(lines)


def _after_imports(text: str, block: str) -> str:
    tree = _parse(text)
    if tree is None:
        return text
    last = 0
    for statement in tree.body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)) or (
            isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        ):
            last = statement.end_lineno or last
        else:
            break
    lines = text.splitlines(keepends=True)
    return "".join(lines[:last]) + block + "".join(lines[last:])
