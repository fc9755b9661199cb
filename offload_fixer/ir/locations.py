"""Decode MLIR locations into frames, with jaxlib's typed location classes when it has them.

Recent jaxlibs expose ``NameLoc``/``CallSiteLoc``/``FileLineColLoc``/``FusedLoc``; older
bindings only print a location (:func:`offload_fixer.jax_compat.mlir.typed_locations` says which),
so there we read the printed ``loc(...)`` form with a small recursive-descent parser of MLIR's
location grammar (never of the module).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jaxlib.mlir import ir

from offload_fixer.jax_compat import mlir as jax_mlir

_TYPED = jax_mlir.typed_locations()


@dataclass(frozen=True)
class Frame:
    function: str | None
    path: str
    line: int
    col: int
    end_line: int | None = None
    end_col: int | None = None


@dataclass(frozen=True)
class OpLocation:
    """``name`` is JAX's op name (``jit(f)/device_put``); ``frames`` innermost first."""

    name: str | None
    frames: tuple[Frame, ...]

    @property
    def primitive(self) -> str | None:
        return self.name.rsplit("/", 1)[-1] if self.name else None


UNKNOWN = OpLocation(None, ())


def decode(location: Any) -> OpLocation:
    if _TYPED:
        names: list[str] = []
        frames: list[Frame] = []
        _walk_typed(location, names, frames, None)
        return OpLocation(names[0] if names else None, tuple(frames))
    return parse_location_text(str(location))


def _walk_typed(loc: Any, names: list[str], frames: list[Frame], label: str | None) -> None:
    """A name wrapping a file position labels a frame; any other name is an op name."""
    if isinstance(loc, ir.NameLoc):
        child = loc.child_loc
        if isinstance(child, ir.FileLineColLoc):
            _walk_typed(child, names, frames, loc.name_str)
        else:
            names.append(loc.name_str)
            _walk_typed(child, names, frames, label)
    elif isinstance(loc, ir.CallSiteLoc):
        _walk_typed(loc.callee, names, frames, label)
        _walk_typed(loc.caller, names, frames, label)
    elif isinstance(loc, ir.FileLineColLoc):
        is_range = (loc.end_line, loc.end_col) != (loc.start_line, loc.start_col)
        frames.append(
            Frame(
                label,
                loc.filename,
                loc.start_line,
                loc.start_col,
                loc.end_line if is_range else None,
                loc.end_col if is_range else None,
            )
        )
    elif isinstance(loc, ir.FusedLoc):
        for inner in loc.locations:
            _walk_typed(inner, names, frames, label)


# ---------------------------------------------------------------------------------------
# Printed-form parser for bindings without typed locations.
def parse_location_text(text: str) -> OpLocation:
    parser = _LocParser(text)
    names: list[str] = []
    frames: list[Frame] = []
    parser.parse_top(names, frames)
    return OpLocation(names[0] if names else None, tuple(frames))


def parse_location_array(text: str) -> list[OpLocation]:
    """The locations of a printed array attribute of locations (``[loc(unknown), loc("x")]``):
    jaxlib's bindings (0.10.2, 0.12.0.1) fail to read one element of such an array, so its
    printed form is read with the location grammar."""
    parser = _LocParser(text)
    found: list[OpLocation] = []
    parser._expect("[")
    while parser._peek() not in ("]", ""):
        names: list[str] = []
        frames: list[Frame] = []
        parser.parse_top(names, frames)
        found.append(OpLocation(names[0] if names else None, tuple(frames)))
        if parser._peek() == ",":
            parser.pos += 1
    parser._expect("]")
    return found


class _LocParser:
    """Grammar: loc(L); L := unknown | "file":line:col [to [line:]col] | "name"[(L)]
    | callsite(L at L) | fused[<attr>][L, ...]."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def parse_top(self, names: list[str], frames: list[Frame]) -> None:
        self._skip_ws()
        if self.text.startswith("loc(", self.pos):
            self.pos += 4
            self._loc(names, frames, None)
            self._expect(")")
        else:
            self._loc(names, frames, None)

    def _loc(self, names: list[str], frames: list[Frame], label: str | None) -> None:
        self._skip_ws()
        if self.text.startswith("unknown", self.pos):
            self.pos += len("unknown")
        elif self.text.startswith("callsite(", self.pos):
            self.pos += len("callsite(")
            self._loc(names, frames, label)
            self._skip_ws()
            self._expect("at")
            self._loc(names, frames, label)
            self._expect(")")
        elif self.text.startswith("fused", self.pos):
            self.pos += len("fused")
            if self._peek() == "<":
                self._skip_balanced("<", ">")
            self._expect("[")
            while True:
                self._loc(names, frames, label)
                self._skip_ws()
                if self._peek() == ",":
                    self.pos += 1
                    continue
                break
            self._expect("]")
        elif self._peek() == '"':
            string = self._string()
            self._skip_ws()
            if self._peek() == ":":
                frames.append(self._file_line_col(string, label))
            elif self._peek() == "(":
                self.pos += 1
                start = self.pos
                self._skip_ws()
                inner_is_file = self._peek() == '"' and self._is_file_ahead()
                self.pos = start
                if inner_is_file:
                    self._loc(names, frames, string)
                else:
                    names.append(string)
                    self._loc(names, frames, label)
                self._expect(")")
            else:
                names.append(string)
        elif self._peek() == "#":
            # An alias reference never appears in a printed Location; tolerate it.
            while self.pos < len(self.text) and self.text[self.pos] not in "),]":
                self.pos += 1
        else:
            raise ValueError(f"cannot read location at {self.pos}: {self.text!r}")

    def _is_file_ahead(self) -> bool:
        save = self.pos
        self._string()
        is_file = self._peek() == ":"
        self.pos = save
        return is_file

    def _file_line_col(self, path: str, label: str | None) -> Frame:
        self._expect(":")
        line = self._int()
        self._expect(":")
        col = self._int()
        end_line = end_col = None
        self._skip_ws()
        if self.text.startswith("to", self.pos):
            self.pos += 2
            self._skip_ws()
            if self._peek() == ":":
                self.pos += 1
                end_line, end_col = line, self._int()
            else:
                end_line = self._int()
                self._expect(":")
                end_col = self._int()
        return Frame(label, path, line, col, end_line, end_col)

    def _string(self) -> str:
        self._expect('"')
        out = []
        while self.text[self.pos] != '"':
            ch = self.text[self.pos]
            if ch == "\\":
                self.pos += 1
                ch = self.text[self.pos]
            out.append(ch)
            self.pos += 1
        self.pos += 1
        return "".join(out)

    def _int(self) -> int:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        return int(self.text[start : self.pos])

    def _skip_balanced(self, open_ch: str, close_ch: str) -> None:
        depth = 0
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            self.pos += 1
            if ch == open_ch:
                depth += 1
            elif ch == close_ch:
                depth -= 1
                if depth == 0:
                    return

    def _peek(self) -> str:
        self._skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def _expect(self, token: str) -> None:
        self._skip_ws()
        if not self.text.startswith(token, self.pos):
            raise ValueError(f"expected {token!r} at {self.pos} in location {self.text!r}")
        self.pos += len(token)
