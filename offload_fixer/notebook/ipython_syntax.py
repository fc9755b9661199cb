"""IPython's own syntax in a cell, set aside so that the rest can be read as Python.

A cell that starts with a cell magic (``%%time``, ``%%bash``...) is not Python: it is left
out. Lines that are IPython commands -- line magics (``%timeit f(x)``), shell escapes
(``!pip install ...``), their assignments (``files = !ls``) and help (``jax.jit?``) -- become
``pass`` at the same indentation, with a comment that names them uniquely, so every other
line keeps its number and a block whose only body was a magic still parses. After a fix
the placeholders are put back as the user wrote them (:meth:`MaskedCell.restore`).
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

CELL_MAGIC = re.compile(r"\s*%%")
_COMMAND = re.compile(r"\s*(?:[%!]|\?{1,2}[\w.])")
_ASSIGNED_COMMAND = re.compile(r"\s*[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*[%!]")
_HELP = re.compile(r"\s*[\w.]+\?{1,2}\s*$")
_LINE = re.compile(r"[^\n]*\n|[^\n]+$")
PLACEHOLDER = "pass  # ipython-command {number}"
_PLACEHOLDER = re.compile(r"pass  # ipython-command (\d+)$")


@dataclass(frozen=True)
class MaskedCell:
    """A cell's text as Python, and the IPython lines it stands in for."""

    python: str
    commands: dict[int, str]
    """Placeholder number -> the line it replaced, without its line end."""

    def restore(self, python: str) -> str:
        """``python`` (this cell's masked text, possibly edited) with each placeholder back
        as the command it replaced. Raises ``ValueError`` when an edit lost a placeholder."""
        found: set[int] = set()
        out = []
        for line in _LINE.findall(python):
            body = line.rstrip("\r\n")
            match = _PLACEHOLDER.search(body)
            number = int(match.group(1)) if match else None
            if match is not None and number in self.commands and not body[: match.start()].strip():
                found.add(number)
                out.append(self.commands[number] + line[len(body) :])
            else:
                out.append(line)
        missing = set(self.commands) - found
        if missing:
            raise ValueError(f"an edit removed the IPython command {self.commands[min(missing)].strip()!r}")
        return "".join(out)


def mask_cell(source: str, first_number: int = 0) -> MaskedCell | None:
    """The cell as Python (None for a cell magic); placeholders are numbered from
    ``first_number`` up, so that they stay unique across the cells of one notebook."""
    if CELL_MAGIC.match(source):
        return None
    lines = _LINE.findall(source)
    commands: dict[int, str] = {}
    out: list[str] = []
    continued = False
    for line in lines:
        body = line.rstrip("\r\n")
        is_command = continued or (_is_command(body) and _starts_statement(out))
        if is_command:
            number = first_number + len(commands)
            commands[number] = body
            indent = body[: len(body) - len(body.lstrip())] if not continued else _indent_of(out)
            out.append(indent + PLACEHOLDER.format(number=number) + line[len(body) :])
            continued = body.endswith("\\")
        else:
            out.append(line)
    return MaskedCell("".join(out), commands)


def _is_command(line: str) -> bool:
    return bool(_COMMAND.match(line) or _ASSIGNED_COMMAND.match(line) or _HELP.match(line))


def _indent_of(lines: list[str]) -> str:
    last = lines[-1] if lines else ""
    return last[: len(last) - len(last.lstrip())]


def _starts_statement(previous: list[str]) -> bool:
    """Whether the next line starts a new statement: the lines so far leave no bracket,
    string or backslash continuation open (so ``!=`` inside brackets is not a shell escape)."""
    if not previous:
        return True
    text = "".join(previous)
    if not text.endswith("\n"):
        text += "\n"
    try:
        for _ in tokenize.generate_tokens(io.StringIO(text).readline):
            pass
    except (tokenize.TokenError, SyntaxError):
        return False
    return True
