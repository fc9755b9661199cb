"""What the prefilter and the result cache need of one file's bytes, each computed once: the
words it spells (:mod:`.prefilter`), the imports it names (read with a regular expression,
never parsed), its SHA-256 and why it is not Python text. A :class:`TextFacts` reads the file
only when a fact it was not given is asked for, so a run whose files a manifest vouches for
(:mod:`.manifest`) decides which of them to check without reading them.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from .prefilter import checks_policy_alone, spells_host, spells_jit, spells_offload

_IMPORT = re.compile(
    rb"[ \t]*(?:from[ \t]+(\.*)[ \t]*([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)|import[ \t]+([^\n#;]*))"
)
"""``from X import a, (b, c)`` and ``import X.Y as Z``, matched at a line start. A text scan, so
it may see an import in a string too: the prefilter only needs to over-approximate."""


class Import(NamedTuple):
    """One imported module as written: ``level`` leading dots, dotted ``module``, and the
    names taken from it (each may be a submodule). A named tuple: a run builds thousands."""

    level: int
    module: str
    names: tuple[str, ...] = ()


MODELED_PACKAGES = frozenset({"jax", "jaxlib", "flax", "optax", "numpy", "functools", "builtins"})
"""Top-level packages whose APIs the check knows by name (``names.py``): never project modules."""
_STANDARD_LIBRARY = frozenset(getattr(sys, "stdlib_module_names", ()))


def is_modeled(qualname: str) -> bool:
    """A name the check knows by its qualified name (``jax.numpy.sum``), or the standard library."""
    head = qualname.split(".", 1)[0]
    return head in MODELED_PACKAGES or head in _STANDARD_LIBRARY


def followed(found: Import) -> bool:
    """Whether an import may name a module of the project (relative, or of no modelled package)."""
    return bool(found.level) or (bool(found.module) and not is_modeled(found.module))


def scan_imports(data: bytes) -> Iterator[Import]:
    """The imports of a text, without parsing it: each ``import`` found by a substring search
    (fast in C), then its line read with a regular expression."""
    position = data.find(b"import")
    seen_lines: set[int] = set()
    while position >= 0:
        line_start = data.rfind(b"\n", 0, position) + 1
        if line_start not in seen_lines:
            seen_lines.add(line_start)
            match = _IMPORT.match(data, line_start)
            if match is not None:
                yield from _imports_of(match)
        position = data.find(b"import", position + 6)


def _imports_of(match: re.Match) -> Iterator[Import]:
    dots, module, names, plain = match.groups()
    if plain is not None:
        for part in plain.split(b","):
            words = part.split()
            if words:
                yield Import(0, words[0].decode("ascii", "replace"))
        return
    taken = []
    for part in names.strip(b"()").replace(b"\\\n", b" ").split(b","):
        words = part.split()
        if words and words[0] != b"*":
            taken.append(words[0].decode("ascii", "replace"))
    yield Import(len(dots), module.decode("ascii", "replace"), tuple(taken))


_SPELLINGS: dict[str, Callable[[bytes], bool]] = {
    "jit": spells_jit,
    "host": spells_host,
    "offload": spells_offload,
    "alone": checks_policy_alone,
}


class TextFacts:
    """The facts of one file's bytes. ``known``: facts kept from an earlier read of the same
    bytes (a manifest's entry, filled in place as more are computed, so the manifest keeps them
    too); ``load``: the bytes, read only when a fact is missing (None: the file cannot be read,
    and every fact is that of an empty text, noted nowhere)."""

    __slots__ = ("_changed", "_data", "_imports", "_load", "known")

    def __init__(
        self,
        data: bytes | None = None,
        load: Callable[[], bytes | None] | None = None,
        known: dict[str, Any] | None = None,
        changed: Callable[[], None] | None = None,
    ) -> None:
        """``changed()``: called when ``known`` changes (the manifest that holds it is to be written)."""
        self._data = data
        self._load = load
        self._imports: tuple[Import, ...] | None = None
        self._changed = changed
        self.known: dict[str, Any] = {} if known is None else known

    @property
    def data(self) -> bytes | None:
        """The bytes, read on the first call where they were not given."""
        if self._data is None and self._load is not None:
            load, self._load = self._load, None
            self._data = load()
            if self._data is None and self.known:
                self.known.clear()  # gone since the manifest saw it: nothing it kept holds
                self._note()
        return self._data

    def _note(self) -> None:
        if self._changed is not None:
            self._changed()

    def give(self, data: bytes) -> None:
        """The bytes, read by the caller after the ``stat`` that keyed ``known`` (the facts kept
        are of these bytes from now on)."""
        if self._data is not data:
            if self.known:
                self.known.clear()
                self._note()
            self._data, self._load, self._imports = data, None, None

    @property
    def loaded(self) -> bool:
        return self._data is not None

    def _fact(self, name: str, compute: Callable[[bytes], Any], default: Any) -> Any:
        value = self.known.get(name)
        if value is None:
            data = self.data
            if data is None:
                return default
            value = self.known[name] = compute(data)
            self._note()
        return value

    def spells(self, word: str) -> bool:
        """:data:`_SPELLINGS`' test ``word`` of the text (``jit``, ``host``, ``offload``, ``alone``),
        its names read as Python reads them (:func:`folded`)."""
        return bool(self._fact(word, lambda data: _SPELLINGS[word](folded(data)), False))

    @property
    def sha256(self) -> str:
        """The hex SHA-256 of the bytes ("" when they cannot be read)."""
        return str(self._fact("sha256", _sha256, ""))

    def imports(self) -> tuple[Import, ...]:
        """The imports of :func:`scan_imports` of the text that may name a project module
        (:func:`followed`): most name JAX or the standard library, and are not kept."""
        if self._imports is None:
            kept = self._fact("imports", _followed_imports, [])
            self._imports = tuple(Import(level, module, tuple(names)) for level, module, names in kept)
        return self._imports

    def keep(self, name: str, value: Any) -> None:
        """Keep a fact the caller found (``notebook``: what reading a notebook gave)."""
        self.known[name] = value
        self._note()

    def screened(self, key: str, screen: Callable[[bytes], tuple[int, int, str] | None]) -> tuple[int, int, str] | None:
        """``screen(bytes)`` (why the text is not Python, or None), kept under ``key`` (the
        settings it depends on)."""
        found = self._fact(f"screen:{key}", lambda data: [screen(data)], [None])[0]
        return None if found is None else (int(found[0]), int(found[1]), str(found[2]))


def valid_facts(known: Any) -> bool:
    """Whether ``known`` has the shape :class:`TextFacts` keeps (a manifest can come from
    anywhere a checkout does: one of another shape is no manifest, never an error)."""
    if not isinstance(known, dict):
        return False
    for name, value in known.items():
        if name in _SPELLINGS:
            shaped = isinstance(value, bool)
        elif name == "sha256":
            shaped = isinstance(value, str)
        elif name == "imports":
            shaped = isinstance(value, list) and all(_an_import(item) for item in value)
        elif name == "notebook":
            shaped = value is None or (
                isinstance(value, list)
                and len(value) == 2
                and value[0] in ("skipped", "error")
                and isinstance(value[1], str)
            )
        elif name.startswith("screen:"):
            shaped = isinstance(value, list) and len(value) == 1 and (value[0] is None or _a_position(value[0]))
        else:
            shaped = False
        if not shaped:
            return False
    return True


def _an_import(item: Any) -> bool:
    return (
        isinstance(item, list)
        and len(item) == 3
        and type(item[0]) is int
        and isinstance(item[1], str)
        and isinstance(item[2], list)
        and all(isinstance(name, str) for name in item[2])
    )


def _a_position(item: Any) -> bool:
    return (
        isinstance(item, list)
        and len(item) == 3
        and type(item[0]) is int
        and type(item[1]) is int
        and isinstance(item[2], str)
    )


def _followed_imports(data: bytes) -> list[list[Any]]:
    return [[found.level, found.module, list(found.names)] for found in scan_imports(folded(data)) if followed(found)]


def folded(data: bytes) -> bytes:
    """``data`` with its text in NFKC form, as Python reads names (``jit`` in fullwidth letters is ``jit``),
    for the prefilter's word searches; ``data`` itself where that changes nothing (ASCII, or
    normalized already). Strings and comments are folded too, which only lets more through."""
    if data.isascii():
        return data
    text = data.decode("utf-8", "surrogateescape")
    if unicodedata.is_normalized("NFKC", text):
        return data
    return unicodedata.normalize("NFKC", text).encode("utf-8", "surrogateescape")


def _sha256(data: bytes) -> str:
    import hashlib  # here, not at start-up: a tree with nothing to analyse hashes nothing

    return hashlib.sha256(data).hexdigest()
