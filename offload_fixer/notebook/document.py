"""A ``.ipynb`` file: read with the standard library (and validated with nbformat where it is
installed), edited as text.

nbformat writing a notebook back would re-serialise all of it (key order, indentation,
escapes, outputs), so a fix instead replaces the JSON text of the edited cells' ``source``
values, found by a walk over the original text, and leaves every other byte as it was. The
result is read back with nbformat, validated, and compared with the original notebook: it
must differ in those cells' sources and nowhere else before it is written.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from offload_fixer.source.decoding import NOTEBOOK_SUFFIX, read_regular_file

from .program import Program, code_cells

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class NotebookError(ValueError):
    """A file that is not a notebook nbformat can read and validate."""


class NotPythonNotebook(NotebookError):
    """A notebook whose kernel runs another language (Julia, R): not checked, not fixed."""

    def __init__(self, language: str) -> None:
        super().__init__(f"its kernel runs {language}, not Python: skipped")
        self.language = language


def is_notebook(path: str) -> bool:
    return str(path).endswith(NOTEBOOK_SUFFIX)


def read_program_bytes(path: str, validate: bool = True) -> bytes:
    """The Python a file holds, as the tool reads it: a ``.py`` file's bytes, a notebook's
    code cells as one program (UTF-8). Raises ``OSError``, or :class:`NotebookError`.
    ``validate=False`` checks a notebook only for what reading its cells needs, not against
    nbformat's schema (most of the cost of reading one): for a screen over many files, which
    validates only the notebooks it goes on to analyse."""
    if is_notebook(path):
        return NotebookFile.read(path, validate).program.data
    return read_regular_file(path)


@dataclass(frozen=True)
class SourceValue:
    """Where one cell's ``source`` value is in the file's text."""

    start: int
    end: int
    items: tuple[tuple[int, int], ...] | None
    """(start, end) of each string of a list value; None for a single-string value."""


class NotebookFile:
    """A notebook's text, its nbformat object and its code cells as one :class:`Program`."""

    def __init__(self, path: str, text: str, validate: bool = True) -> None:
        self.path = path
        self.text = text
        self.notebook = _read(path, text, validate)
        language = kernel_language(self.notebook)
        if language is not None and language.lower() not in ("python", "python3", "ipython"):
            raise NotPythonNotebook(language)
        self.program = Program(code_cells(self.notebook["cells"]))

    @classmethod
    def read(cls, path: str, validate: bool = True) -> NotebookFile:
        try:
            data = read_regular_file(path)
        except OSError as exc:
            raise NotebookError(f"cannot read file: {exc.strerror or exc}") from exc
        return cls.from_bytes(path, data, validate)

    @classmethod
    def from_bytes(cls, path: str, data: bytes, validate: bool = True) -> NotebookFile:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotebookError(f"not valid UTF-8 JSON: {exc.reason} at byte {exc.start}") from exc
        return cls(path, text, validate)

    @cached_property
    def sources(self) -> dict[int, SourceValue]:
        """The ``source`` value of each cell, by 1-based cell position."""
        return _source_values(self.text)

    def with_sources(self, sources: Mapping[int, str]) -> str:
        """The file's text with the given cells' sources replaced, every other byte kept;
        checked to be the same notebook but for those sources."""
        text = self.text
        for number in sorted(sources, reverse=True):
            value = self.sources[number]
            text = text[: value.start] + self._encode(value, sources[number]) + text[value.end :]
        self._check_equivalent(text, sources)
        return text

    def file_position(self, cell: int, line: int, col: int) -> tuple[int, int]:
        """(line, column) in the file's text, both 1-based, of a cell's 1-based line and
        column: where an editor opening the ``.ipynb`` as text shows that character."""
        value = self.sources[cell]
        if value.items is None:
            start, end = value.start, value.end
            target_line = line - 1
        else:
            if not value.items:
                return self._line_col(value.start)
            start, end = value.items[min(max(line, 1), len(value.items)) - 1]
            target_line = 0
        offset = _raw_offset(self.text, start, end, target_line, col - 1)
        return self._line_col(offset)

    def _line_col(self, offset: int) -> tuple[int, int]:
        line_start = self.text.rfind("\n", 0, offset) + 1
        return self.text.count("\n", 0, offset) + 1, offset - line_start + 1

    def _encode(self, value: SourceValue, source: str) -> str:
        ascii_only = self.text.isascii()
        if value.items is None:
            return json.dumps(source, ensure_ascii=ascii_only)
        lines = re.findall(r"[^\n]*\n|[^\n]+$", source)
        if not lines:
            return "[]"
        opening, between, closing = self._list_layout(value)
        items = [json.dumps(line, ensure_ascii=ascii_only) for line in lines]
        return "[" + opening + ("," + between).join(items) + closing + "]"

    def _list_layout(self, value: SourceValue) -> tuple[str, str, str]:
        """The whitespace after ``[``, after each ``,`` and before ``]`` in the original list
        (nbformat's: one item per line, indented one more than the key)."""
        items = value.items or ()
        if items:
            opening = self.text[value.start + 1 : items[0][0]]
            closing = self.text[items[-1][1] : value.end - 1]
            between = self.text[items[0][1] : items[1][0]].lstrip()[1:] if len(items) > 1 else opening
            return opening, between, closing
        line_start = self.text.rfind("\n", 0, value.start) + 1
        indent = self.text[line_start : _skip(self.text, line_start)].strip("\r\n")
        newline = "\r\n" if "\r\n" in self.text else "\n"
        return newline + indent + " ", newline + indent + " ", newline + indent

    def _check_equivalent(self, text: str, sources: Mapping[int, str]) -> None:
        """nbformat must read and validate the edited text, and it must hold the same JSON
        as the original but for the edited cells' sources."""
        _read(self.path, text)
        expected = json.loads(self.text)
        for number, source in sources.items():
            expected["cells"][number - 1]["source"] = source
        found = json.loads(text)
        for number in sources:
            cell = found["cells"][number - 1]
            if isinstance(cell["source"], list):
                cell["source"] = "".join(cell["source"])
        if found != expected:
            raise NotebookError("the edited notebook would differ outside the fixed cells; nothing was written")


def _read(path: str, text: str, validate: bool = True) -> dict:
    """The notebook in ``text``, read as Jupyter reads it: the JSON checked for what a reader
    of cells needs (with the standard library, so no extra is needed), then, where nbformat is
    installed and ``validate`` asks for it, converted by nbformat's own reader and validated
    against the schema of the current minor version when the cells carry ids (what Jupyter
    writes while keeping an older ``nbformat_minor``). Raises :class:`NotebookError`, one
    line, for anything else."""
    try:
        raw = json.loads(text)
    except RecursionError as exc:
        raise NotebookError("not a Jupyter notebook: its JSON is nested too deeply to read") from exc
    except ValueError as exc:
        raise NotebookError(f"not a Jupyter notebook: not JSON ({_first_line(exc)})") from exc
    _check_structure(raw)
    if not validate:
        return raw
    try:
        import nbformat
    except ImportError:
        return raw
    with warnings.catch_warnings():
        # nbformat warns about what it would normalise (cells without ids); the file is never
        # written from its objects, so what Jupyter opens is read as it is.
        warnings.simplefilter("ignore")
        try:
            notebook = nbformat.reads(text, as_version=4)
            probe = notebook
            if probe.get("nbformat_minor", 0) < 5 and any("id" in cell for cell in probe["cells"]):
                probe = nbformat.from_dict({**probe, "nbformat_minor": 5})
            if any(_code_cell_keys(cell) for cell in probe["cells"]):
                probe = nbformat.from_dict(
                    {**probe, "cells": [_without_code_cell_keys(cell) for cell in probe["cells"]]}
                )
            nbformat.validate(probe)
        except nbformat.ValidationError as exc:
            raise NotebookError(f"not a valid notebook: {_first_line(exc)}") from exc
        except RecursionError as exc:
            raise NotebookError("not a Jupyter notebook: nested too deeply to validate") from exc
        except Exception as exc:  # nbformat and jsonschema raise many kinds on odd input
            raise NotebookError(f"not a Jupyter notebook: {_first_line(exc)}") from exc
    return notebook


_CODE_CELL_KEYS: dict[str, object] = {"execution_count": None, "outputs": []}
"""What only a code cell carries. Some writers (an output stripper, Colab) leave them on markdown
cells, or drop ``outputs`` from code cells (flax's sst2 example, maxtext's demo notebooks): the
schema refuses both, Jupyter opens the notebook and writes them back in place, so such a
notebook is validated as Jupyter would save it."""


def _code_cell_keys(cell: Mapping) -> bool:
    """Whether ``cell`` carries code-cell keys it should not, or lacks those it should."""
    if cell.get("cell_type") == "code":
        return any(key not in cell for key in _CODE_CELL_KEYS)
    return any(key in cell for key in _CODE_CELL_KEYS)


def _without_code_cell_keys(cell: Mapping) -> Mapping:
    if not _code_cell_keys(cell):
        return cell
    if cell.get("cell_type") == "code":
        return {**_CODE_CELL_KEYS, **cell}
    return {key: value for key, value in cell.items() if key not in _CODE_CELL_KEYS}


def _check_structure(raw: object) -> None:
    """What reading cells needs, checked before anything uses it: an object with
    ``nbformat`` 4 or newer and a ``cells`` list of objects whose ``source`` is a string or a
    list of strings."""
    if not isinstance(raw, dict):
        raise NotebookError(f"not a Jupyter notebook: the JSON is {type(raw).__name__}, not an object")
    version = raw.get("nbformat")
    if not isinstance(version, int) or isinstance(version, bool):
        raise NotebookError("not a Jupyter notebook: no integer 'nbformat' version")
    if version < 4:
        raise NotebookError(f"nbformat {version} notebooks are not supported (4 and newer are)")
    cells = raw.get("cells")
    if not isinstance(cells, list):
        raise NotebookError(f"not a valid notebook: 'cells' is {type(cells).__name__}, not a list")
    if not isinstance(raw.get("metadata", {}), dict):
        raise NotebookError("not a valid notebook: 'metadata' is not an object")
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise NotebookError(f"not a valid notebook: cell {number} is not a cell (an object with a cell_type)")
        source = cell.get("source", "")
        if not isinstance(source, str) and not (isinstance(source, list) and all(isinstance(s, str) for s in source)):
            raise NotebookError(f"not a valid notebook: cell {number}'s source is not a string or a list of strings")


def kernel_language(notebook: Mapping) -> str | None:
    """The language the notebook's kernel runs (its metadata), or ``None`` where it says none."""
    metadata = notebook.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        section = metadata.get(key)
        if isinstance(section, Mapping) and isinstance(section.get(field), str) and section[field]:
            return section[field]
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ---------------------------------------------------------------------------------------
# Walking the JSON text
def _skip(text: str, index: int) -> int:
    whitespace = _WHITESPACE.match(text, index)
    assert whitespace is not None, "a starred pattern matches everywhere"
    return whitespace.end()


def _expect(text: str, index: int, char: str) -> int:
    if text[index : index + 1] != char:
        raise NotebookError(f"not a Jupyter notebook: expected {char!r} at character {index}")
    return index + 1


def _object_members(text: str, index: int) -> list[tuple[str, int, int]]:
    """(key, value start, value end) of each member of the JSON object at ``index``."""
    members: list[tuple[str, int, int]] = []
    index = _skip(text, _expect(text, index, "{"))
    if text[index : index + 1] == "}":
        return members
    while True:
        # typeshed omits json.decoder.scanstring, which the module defines and documents
        key, index = json.decoder.scanstring(text, _expect(text, index, '"'))  # type: ignore[attr-defined]
        start = _skip(text, _expect(text, _skip(text, index), ":"))
        end = _DECODER.raw_decode(text, start)[1]
        members.append((key, start, end))
        index = _skip(text, end)
        if text[index : index + 1] == "}":
            return members
        index = _skip(text, _expect(text, index, ","))


def _array_elements(text: str, index: int) -> list[tuple[int, int]]:
    """(start, end) of each element of the JSON array at ``index``."""
    elements: list[tuple[int, int]] = []
    index = _skip(text, _expect(text, index, "["))
    if text[index : index + 1] == "]":
        return elements
    while True:
        end = _DECODER.raw_decode(text, index)[1]
        elements.append((index, end))
        index = _skip(text, end)
        if text[index : index + 1] == "]":
            return elements
        index = _skip(text, _expect(text, index, ","))


def _source_values(text: str) -> dict[int, SourceValue]:
    found: dict[int, SourceValue] = {}
    for key, start, _end in _object_members(text, _skip(text, 0)):
        if key != "cells":
            continue
        for position, (cell_start, _cell_end) in enumerate(_array_elements(text, start), 1):
            for cell_key, value_start, value_end in _object_members(text, cell_start):
                if cell_key == "source":
                    items = None if text[value_start] == '"' else tuple(_array_elements(text, value_start))
                    found[position] = SourceValue(value_start, value_end, items)
    return found


def _raw_offset(text: str, start: int, end: int, line: int, column: int) -> int:
    """Offset in ``text`` of the character at (0-based) ``line`` and ``column`` of the
    string decoded from the JSON string token ``text[start:end]``."""
    index = start + 1  # past the opening quote
    current_line = current_column = 0
    while index < end - 1:
        if current_line == line and current_column == column:
            return index
        char = text[index]
        if char == "\\":
            escape = text[index + 1]
            decoded = "\n" if escape == "n" else escape
            length = 6 if escape == "u" else 2
            if escape == "u" and 0xD800 <= int(text[index + 2 : index + 6], 16) <= 0xDBFF:
                length = 12  # a surrogate pair is one code point
        else:
            decoded, length = char, 1
        if decoded == "\n":
            if current_line == line:
                return index
            current_line, current_column = current_line + 1, 0
        else:
            current_column += 1
        index += length
    return index
