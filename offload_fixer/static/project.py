"""The checked file's project: the modules it imports, found on disk, and what they define.

A sharding is often built in one module and used by a jit in another (a ``shardings``
module next to a ``train_step`` module). The check follows imports inside the project: the
directory of the checked file (as Python puts a script's directory on ``sys.path``), the
root of the package the file belongs to (above its last ``__init__.py``), the project root
(:func:`project_root`: the nearest directory above the file with a ``pyproject.toml``,
``setup.py``, ``setup.cfg`` or ``.git``, else the current directory) and its ``src/``, as
ruff's default ``src = [".", "src"]`` does, and the directories given to ``check``. The
search depends on the file alone, so ``check DIR``, ``check FILE`` (pre-commit) and the
language server resolve an import alike. Imports of the libraries the check models by name (JAX,
flax, optax, NumPy, the standard library) are never followed: those stay names.

Two costs are kept apart:

* which files can hold a host value at all (:meth:`Project.selects`) is decided from text:
  a host spelling in the file, or an import (read with a regular expression, never parsed)
  of a project module that has one, directly or through its own imports;
* what an imported module defines is read with ``ast`` (which top-level statements bind a
  name, :class:`ModuleFacts`), and only the statements the check actually evaluates are
  parsed with libcst, through the same per-statement cache the editor uses
  (:class:`offload_fixer.static.outline.SourceCache`).

Everything is cached by file and its modification stamp, so a tree is still one pass and a
long-lived language server sees edits on disk. A run of ``check`` (``Project(snapshot=True)``)
takes the files as they were first read, and keeps what analyses derive from several modules
(:attr:`Project.memo`: the candidates' answers about each module, :mod:`.candidates`) for
every file it checks; a checked file that an earlier one imported is parsed once.

Over 500 lines on purpose: the project's modules, their facts and the prefilter's answers
share one cache keyed by file and stamp.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import re
import sys
import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from offload_fixer.source.decoding import SourceDecodeError, decode, python_spelling, read_regular_file
from offload_fixer.source.lines import count_line_ends, lines_before

from .names import import_binding
from .outline import Outline, SourceCache, outline
from .text_facts import MODELED_PACKAGES, Import, TextFacts, followed, is_modeled, scan_imports

__all__ = ["MODELED_PACKAGES", "Import", "ModuleFacts", "Project", "is_modeled", "project_root", "scan_imports"]

if TYPE_CHECKING:
    from .manifest import Manifest
    from .source import ParsedSource

PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
"""What marks a project's root directory (as for ruff and pip)."""

_GLOBAL_STATEMENT = re.compile(r"^[ \t]*global[ \t]+([\w \t,]+)", re.MULTILINE)


def project_root(directory: str, given: Sequence[str] = ()) -> str | None:
    """The nearest directory at or above ``directory`` with a :data:`PROJECT_MARKERS` file;
    else (a checkout without one) the outermost of the ``given`` roots that holds it (the
    directories named to ``check``, the language server's configuration root), else the current
    directory when ``directory`` is inside it. ``check``, pre-commit and the language server
    all resolve imports through it (:meth:`Project.search_roots`), so how a file is named (a
    directory, the file itself) never changes what its imports find."""
    start = here = os.path.abspath(directory)
    while True:
        if any(os.path.exists(os.path.join(here, marker)) for marker in PROJECT_MARKERS):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    for root in sorted(given, key=len):
        if os.path.commonpath([root, start]) == root:
            return root
    cwd = os.getcwd()
    inside = os.path.commonpath([cwd, start]) == cwd
    return cwd if inside else None


class ModuleFacts:
    """What ``ast`` tells about a module without libcst: where its top-level statements are
    (the chunks of :mod:`.outline`) and which of them bind each name."""

    def __init__(
        self,
        path: str,
        data: bytes,
        text: str,
        found: Outline,
        cache: SourceCache | None = None,
        sha256: str | None = None,
    ) -> None:
        """``cache``: where the parsed chunks are kept (a private one when None); ``sha256``:
        the hex digest of ``data`` when the caller has it already."""
        if sha256 is None:
            import hashlib  # here, not at start-up: a tree with nothing to analyse hashes nothing

            sha256 = hashlib.sha256(data).hexdigest()
        self.path = path
        self.data = data
        self.text = text
        self.outline = found
        self.sha256 = sha256
        self.mutated_globals = mutated_globals(text)
        self.binders: dict[str, list[int]] = {}
        """name -> indices of the chunks whose statements bind it at module level."""
        self.star_sources: list[tuple[int, str]] = []
        """(level, module) of each ``from <level dots><module> import *`` at module level, in order."""
        for index, group in enumerate(found.groups):
            for statement in group:
                names, stars = _bindings_of(statement)
                for name in names:
                    self.binders.setdefault(name, []).append(index)
                self.star_sources.extend(stars)
        self.cache = cache if cache is not None else SourceCache(spare=0)
        self.memo: dict[str, Any] = {}
        """What other analyses derive from these facts alone, kept as long as they are."""
        self._line_offsets: list[int] | None = None
        self._occurrences: list[int] | None = None
        self._parsed_whole: ParsedSource | None = None
        self.pruned: dict[int, str] = {}
        """Group index -> its text with the methods no host value reaches blanked
        (:mod:`.pruning`): what libcst parses of it, in the check of this file only."""

    def chunk(self, index: int) -> Any:
        """The libcst chunk of one top-level statement group (None when it does not parse alone)."""
        from .source import cached_chunk

        if self.outline.spans is None:
            return None
        pruned = self.pruned.get(index)
        if pruned is not None:
            occurrence = sum(1 for i, text in self.pruned.items() if i < index and text == pruned)
            return cached_chunk(self.cache, pruned, index == 0, ("pruned", occurrence), self._shape(index, pruned))
        if self._occurrences is None:  # equal chunks of one file are told apart (``cached_chunk``)
            seen: dict[str, int] = {}
            self._occurrences = []
            for piece in self.pieces():
                self._occurrences.append(seen.get(piece, 0))
                seen[piece] = self._occurrences[-1] + 1
        start, end = self.outline.spans[index]
        text = self.text[start:end]
        return cached_chunk(self.cache, text, index == 0, self._occurrences[index], self._shape(index, text))

    def _shape(self, index: int, text: str) -> tuple[ast.ClassDef, int] | None:
        """:meth:`class_shape` where the chunk is parsed in pieces, and the outline's ``ast``
        is at hand (a compacted outline's would be parsed again: ``text`` is, by libcst)."""
        from .class_pieces import SPLIT_CHARS

        if len(text) < SPLIT_CHARS or self.outline.compacted:
            return None
        return self.class_shape(index)

    def release(self) -> None:
        """Drop the ``ast`` and the parsed chunks of a checked file's facts once its check is
        done: the interpreter's scopes and values refer to each other, and trees reachable from
        that garbage would be walked by the collector before they are freed (a tenth of a check
        of JAX's tests); freed here, reference counting takes them at once. In place: the
        caller's outline (:func:`.statement_reads.keep_jit_groups_only` kept some trees in it)
        lets go of them too."""
        self.outline.release()
        self.cache = SourceCache(spare=0)

    def piece(self, index: int) -> str:
        """The text of one top-level statement group (the whole text when the outline is not cut)."""
        spans = self.outline.spans
        if spans is None:
            return self.text
        start, end = spans[index]
        return self.text[start:end]

    def pieces(self) -> list[str]:
        """The text of each top-level statement group (none when the outline is not cut)."""
        return [self.text[start:end] for start, end in self.outline.spans or ()]

    def line_offset(self, index: int) -> int:
        if self._line_offsets is None:
            offsets, line = [], 0
            for start, end in self.outline.spans or ():
                offsets.append(line)
                line += count_line_ends(self.text, start, end)
            self._line_offsets = offsets
        return self._line_offsets[index]

    def lines_before_in_ast(self, index: int) -> int:
        """The line number the ``ast`` of group ``index`` gives the line before its chunk: the
        file's where the outline's lines are; else (a document's outline, which keeps the
        statements of earlier versions, :mod:`.outline`) the first statement's line less the
        blank and comment lines above it in the chunk."""
        if self.outline.file_lines:
            return self.line_offset(index)
        return lines_before(self.outline.groups[index][0], self.piece(index))

    def class_shape(self, index: int) -> tuple[ast.ClassDef, int] | None:
        """The ``ast`` of group ``index`` where it is one class statement, with
        :meth:`lines_before_in_ast` (:func:`.class_pieces.parse_class_in_pieces` cuts it by it)."""
        group = self.outline.groups[index]
        if len(group) != 1 or type(group[0]) is not ast.ClassDef:
            return None
        return group[0], self.lines_before_in_ast(index)

    def parsed_whole(self) -> ParsedSource:
        """The module parsed whole by libcst: for texts the outline cannot cut."""
        if self._parsed_whole is None:
            import libcst as cst

            from .source import ParsedSource

            self._parsed_whole = ParsedSource(cst.parse_module(self.text))
        return self._parsed_whole


def mutated_globals(text: str) -> frozenset[str]:
    """Names some ``global`` statement of the text declares: assigned from another scope."""
    if "global" not in text:  # most texts: no scan of every line
        return frozenset()
    return frozenset(name.strip() for match in _GLOBAL_STATEMENT.findall(text) for name in match.split(","))


def _bindings_of(statement: ast.stmt) -> tuple[tuple[str, ...], tuple[tuple[int, str], ...]]:
    """The names a top-level statement binds, and its star imports, kept by its node: a
    document's outline holds the statements an edit left alone in every version."""
    known = _BINDINGS.get(statement)
    if known is None:
        stars: list[tuple[int, str]] = []
        known = _BINDINGS[statement] = (tuple(_bound_names(statement, stars)), tuple(stars))
    return known


_BINDINGS: weakref.WeakKeyDictionary[ast.stmt, tuple[tuple[str, ...], tuple[tuple[int, str], ...]]] = (
    weakref.WeakKeyDictionary()
)


def _bound_names(statement: ast.stmt, star_sources: list[tuple[int, str]]) -> Iterator[str]:
    """Names a top-level statement binds in the module (not inside its functions or classes);
    its star imports are added to ``star_sources`` instead."""
    stack: list[Any] = [statement]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*" and isinstance(node, ast.ImportFrom):
                    star_sources.append((node.level or 0, node.module or ""))
                else:
                    yield import_binding(node, alias)[0]
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            yield node.id
            continue
        if isinstance(node, ast.ExceptHandler) and node.name:
            yield node.name
        if isinstance(node, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
            continue
        stack.extend(ast.iter_child_nodes(node))


@dataclass
class Consulted:
    """What finding and reading the modules of one check asked of the disk: the directories
    whose entries decided what an import found, and the files read. A result holds while
    both are as they were (:meth:`Project.digests`), whatever was added, removed or edited."""

    directories: set[str]
    files: dict[str, bytes | TextFacts | None]
    """Each file read, with the bytes the check was given, or the facts it took of them (None:
    it could not be read)."""


class Project:
    """Modules found from the checked files, their facts, and the prefilter's answers."""

    def __init__(self, roots: Sequence[str] = (), snapshot: bool = False, manifest: Manifest | None = None) -> None:
        """``snapshot``: the files are taken to stay as they are while this project lives (one
        run of ``check``), so answers that depend on several modules (:attr:`memo`) are kept
        for every file the run checks; a long-lived project (the language server's) keeps none.
        ``manifest``: the facts of files an earlier run read, by their ``stat`` (``snapshot``
        only): a file it vouches for is not read to select files or to compare digests."""
        self.roots = tuple(os.path.abspath(r) for r in roots)
        self.snapshot = snapshot
        self.manifest = manifest if snapshot else None
        self._texts: dict[str, TextFacts] = {}
        """path -> its text's facts (``snapshot`` only)."""
        self.memo: dict[str, Any] = {}
        """What analyses derive from several modules of the project (``snapshot`` only); emptied
        whenever a module's facts change."""
        self._attributed: Consulted | None = None
        self._stamped: dict[str, tuple[Any, Any]] = {}
        """path -> (stamp, bytes or None)."""
        self._facts: dict[str, tuple[Any, ModuleFacts | None]] = {}
        self._host: dict[str, tuple[Any, bool]] = {}
        self._exists: dict[str, bool] = {}
        self._listings: dict[str, frozenset[str]] = {}
        self._remembered: dict[str, bytes] = {}
        self._remembered_digests: dict[str, str] = {}
        self._consulted: Consulted | None = None
        self._listing_digests: dict[str, str] = {}
        self._project_roots: dict[str, tuple[str, ...]] = {}
        """directory -> its project root and the root's ``src/`` (:func:`project_root`)."""
        self._package_roots: dict[str, tuple[str, tuple[str, ...]]] = {}
        """directory -> the root of its package, and the directories searched for it (``snapshot``)."""

    @contextlib.contextmanager
    def consulting(self) -> Iterator[Consulted]:
        """Record what the disk is asked inside the block (one file's check)."""
        outer, self._consulted = self._consulted, Consulted(set(), {})
        try:
            yield self._consulted
        finally:
            self._consulted = outer

    @contextlib.contextmanager
    def attributing(self, record: Consulted | None) -> Iterator[None]:
        """Inside the block, what the disk is asked is noted in ``record`` too (besides the
        file's :meth:`consulting`): what one answer kept in :attr:`memo` depended on, to be
        noted again (:meth:`note`) for each later check that takes the answer."""
        outer, self._attributed = self._attributed, record
        try:
            yield
        finally:
            self._attributed = outer

    def note(self, record: Consulted) -> None:
        """Note what an answer taken from :attr:`memo` asked of the disk, as if asked now."""
        if self._consulted is not None:
            self._consulted.directories |= record.directories
            self._consulted.files.update(record.files)
        if self._attributed is not None:
            self._attributed.directories |= record.directories
            self._attributed.files.update(record.files)

    def digests(self, consulted: Consulted) -> dict[str, str]:
        """A digest of each directory's entries and each file's bytes, as they are now: equal
        digests, equal answers to every question the check asked."""
        import hashlib

        found = {}
        for directory in consulted.directories:
            digest = self._listing_digests.get(directory)
            if digest is None:
                digest = self._listing_digests[directory] = _listing_digest(directory)
            found[f"dir:{directory}"] = digest
        for path, data in consulted.files.items():
            if isinstance(data, TextFacts):
                found[f"file:{path}"] = data.sha256
                continue
            facts = self._texts.get(path)
            if data is not None and facts is not None and facts.loaded and facts.data is data:
                found[f"file:{path}"] = facts.sha256  # hashed once however many entries read it
            else:
                found[f"file:{path}"] = "" if data is None else hashlib.sha256(data).hexdigest()
        return found

    def unchanged(self, digests: dict[str, str]) -> bool:
        """Whether the directories and files behind ``digests`` are as they were (a file the
        manifest vouches for by its ``stat``, without reading it)."""
        consulted = Consulted(set(), {})
        for key in digests:
            kind, _, path = key.partition(":")
            if kind == "dir":
                consulted.directories.add(path)
            else:
                consulted.files[path] = self.text_facts(path) if self.snapshot else self.data(path)
        return self.digests(consulted) == digests

    # ------------------------------------------------------------------ files
    def remember(self, path: str, data: bytes) -> None:
        """The bytes a caller already read (the walk of ``check``): taken as the file's for the
        rest of this run, neither read nor looked at on disk again."""
        key = os.path.abspath(path)
        if key in self._remembered and self._remembered[key] != data:
            self._facts.pop(key, None)
            self._remembered_digests.pop(key, None)
            self._changed()
        self._remembered[key] = data
        facts = self._texts.get(key)
        if facts is not None and not (facts.loaded and facts.data is data):
            self._texts[key] = TextFacts(data)  # bytes of the caller's: nothing a manifest kept

    def text_facts(self, path: str) -> TextFacts:
        """The facts of the text the project reads at ``path`` (:meth:`data`): in a run, each
        file's once, from the manifest where it vouches for the file, else from its bytes when
        a fact is first asked for."""
        key = os.path.abspath(path)
        found = self._texts.get(key)
        if found is None:
            if key in self._remembered or not self.snapshot:
                found = TextFacts(self._read(key))
            elif key in self._stamped:  # read before its facts were asked: its stat may be newer
                found = TextFacts(self._stamped[key][1])
            elif self.manifest is not None:
                found = self.manifest.facts(key, lambda: self._read_disk(key)) or TextFacts(
                    load=lambda: self._read_disk(key)
                )
            else:
                found = TextFacts(load=lambda: self._read(key))
            if self.snapshot:
                self._texts[key] = found
        return found

    def _changed(self) -> None:
        """A module's bytes changed: drop every answer derived from several modules."""
        self.memo.clear()
        self._host.clear()

    def data(self, path: str) -> bytes | None:
        data = self._read(path)
        if self._consulted is not None:
            self._consulted.files[os.path.abspath(path)] = data
        if self._attributed is not None:
            self._attributed.files[os.path.abspath(path)] = data
        return data

    def _read_facts(self, key: str, facts: TextFacts) -> None:
        """Note that an answer took ``facts`` of the file at ``key``, as :meth:`data` notes bytes."""
        if self._consulted is not None:
            self._consulted.files[key] = facts
        if self._attributed is not None:
            self._attributed.files[key] = facts

    def _read(self, path: str) -> bytes | None:
        key = os.path.abspath(path)
        if key in self._remembered:
            return self._remembered[key]
        cached = self._stamped.get(key)
        if cached is not None and self.snapshot:
            return cached[1]
        if self.manifest is not None:  # its stat first, so that the manifest keeps what is read
            return self.text_facts(key).data
        return self._read_disk(key, cached)

    def _read_disk(self, key: str, cached: tuple[Any, Any] | None = None) -> bytes | None:
        stamp = _stamp(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            data = read_regular_file(key)  # a FIFO or device named like a module is never read
        except OSError:
            data = None
        self._stamped[key] = (stamp, data)
        return data

    def reads_as(self, path: str, data: bytes) -> bool:
        """Whether ``data`` is what the project reads at ``path`` (the text its importers see),
        byte for byte, with no form feed that the check's view of a text would cut."""
        return b"\f" not in data and self._read(path) == data

    def facts(self, path: str) -> ModuleFacts | None:
        """The module's ``ast`` facts; None when it cannot be read or parsed."""
        key = os.path.abspath(path)
        if self._consulted is not None or self._attributed is not None:
            self.data(key)  # what the facts are read from, noted even when they are known
        cached = self._facts.get(key)
        if cached is not None and self.snapshot:
            return cached[1]  # a run: the files stay as they were read
        stamp = self.stamp(key)
        if cached is not None:
            if cached[0] == stamp:
                return cached[1]
            self._changed()
        facts = None
        data = self.data(key)
        if data is not None:
            text = _decoded(data)
            if text is not None:
                try:
                    facts = ModuleFacts(key, data, text, outline(text, newer_syntax=True))
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    facts = None
        self._facts[key] = (stamp, facts)
        return facts

    def known_facts(self, path: str) -> ModuleFacts | None:
        """The module's facts where the project has read them already (None: not yet, or they
        cannot be read), without reading them."""
        cached = self._facts.get(os.path.abspath(path))
        return None if cached is None else cached[1]

    def stamp(self, path: str) -> Any:
        """What tells this module's text from another version of it, for an analysis kept
        from an earlier check: its ``stat``, or the digest of the bytes remembered for it (a
        text fixed in memory, checked again by a new project, has the stat of the file)."""
        key = os.path.abspath(path)
        if key not in self._remembered:
            return _stamp(key)
        digest = self._remembered_digests.get(key)
        if digest is None:
            digest = self._remembered_digests[key] = hashlib.sha256(self._remembered[key]).hexdigest()
        return ("remembered", digest)

    # ------------------------------------------------------------------ modules
    def search_roots(self, path: str) -> list[str]:
        """Where absolute imports of ``path`` are looked for: its directory, its package's
        root, the project root (:func:`project_root`, where the roots given count only in a
        tree without a marker) and its ``src/``."""
        directory = os.path.dirname(os.path.abspath(path))
        known = self._package_roots.get(directory)
        if known is None:
            consulted = []
            package_root = directory
            while True:
                consulted.append(package_root)
                if not os.path.isfile(os.path.join(package_root, "__init__.py")):
                    break
                parent = os.path.dirname(package_root)
                if parent == package_root:
                    break
                package_root = parent
            known = (package_root, tuple(consulted))
            if self.snapshot:
                self._package_roots[directory] = known
        package_root = known[0]
        for searched in known[1]:
            self._consult(searched)
        found = self._project_roots.get(directory)
        if found is None:
            root = project_root(directory, self.roots)
            found = self._project_roots[directory] = () if root is None else (root, os.path.join(root, "src"))
        return list(dict.fromkeys([directory, package_root, *found]))

    def module_path(self, parts: Sequence[str], roots: Iterable[str]) -> str | None:
        """The file (or namespace directory) of a dotted module name under ``roots``."""
        for root in roots:
            found = self.child(root, parts)
            if found is not None:
                return found
        return None

    def child(self, base: str, parts: Sequence[str]) -> str | None:
        """``base/a/b.py``, ``base/a/b/__init__.py`` or the directory ``base/a/b``."""
        if not parts or not all(p.isidentifier() for p in parts):
            return None
        if parts[0] not in self._names_in(base):
            return None  # one listing of the directory answers most lookups
        stem = os.path.join(base, *parts)
        for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
            if self._is_file(candidate):
                return candidate
        return stem if self._is_dir(stem) else None

    def submodule(self, module: str, name: str) -> str | None:
        """The submodule ``name`` of a package (its ``__init__.py`` or namespace directory)."""
        if os.path.basename(module) == "__init__.py":
            return self.child(os.path.dirname(module), [name])
        if self._is_dir(module):
            return self.child(module, [name])
        return None

    def package_at(self, directory: str) -> str:
        """A package directory as a module: its ``__init__.py``, or the directory itself."""
        init = os.path.join(directory, "__init__.py")
        return init if self._is_file(init) else directory

    def relative_base(self, path: str, level: int) -> str | None:
        """The package directory a ``from .`` (``level`` dots) import of ``path`` starts at."""
        base = os.path.dirname(os.path.abspath(path))
        for _ in range(level - 1):
            parent = os.path.dirname(base)
            if parent == base:
                return None
            base = parent
        return base

    def _names_in(self, directory: str) -> frozenset[str]:
        """Module and package names a directory holds (listed once per run)."""
        self._consult(directory)
        found = self._listings.get(directory)
        if found is None:
            try:
                entries = os.listdir(directory)
            except OSError:
                entries = []
            found = self._listings[directory] = frozenset(e[:-3] if e.endswith(".py") else e for e in entries)
        return found

    def _is_file(self, path: str) -> bool:
        self._consult(os.path.dirname(path))
        found = self._exists.get(path)
        if found is None:
            found = self._exists[path] = os.path.isfile(path)
        return found

    def _is_dir(self, path: str) -> bool:
        self._consult(os.path.dirname(path))
        key = path + os.sep
        found = self._exists.get(key)
        if found is None:
            found = self._exists[key] = os.path.isdir(path)
        return found

    def _consult(self, directory: str) -> None:
        """Note a directory whose entries an answer depends on."""
        if self._consulted is not None:
            self._consulted.directories.add(directory)
        if self._attributed is not None:
            self._attributed.directories.add(directory)

    # ------------------------------------------------------------------ prefilter
    def selects(self, path: str, data: bytes | TextFacts) -> bool:
        """Whether the check must parse this file: it mentions jit, and a host memory kind can
        reach it (spelled in it, or in a project module it imports, directly or not; an offload
        policy or ``compute_on`` in the file itself counts); or it spells a host memory kind
        itself, for its code outside any jit (:mod:`.eager`); or its offload policies'
        destinations need a check. A module that only imports a policy is not selected for it:
        what a policy offloads is the residuals, which ``run`` judges. ``data``: the file's
        bytes, or their facts (:meth:`text_facts`)."""
        facts = data if isinstance(data, TextFacts) else TextFacts(data)
        if not facts.spells("jit"):
            return facts.spells("alone") or facts.spells("host")  # eager code on host arrays
        if facts.spells("host") or facts.spells("offload"):
            return True
        if path.startswith("<"):
            return False  # a text of no file: no project around it
        return any(self.host_reachable(target) for target in self.imported_files(path, facts))

    def imported_files(self, path: str, data: bytes | TextFacts) -> Iterator[str]:
        """Project files (modules, packages' ``__init__.py``) an import of ``path`` names."""
        roots: list[str] = []
        for found in data.imports() if isinstance(data, TextFacts) else filter(followed, scan_imports(data)):
            if not found.level and not roots and found.module and not is_modeled(found.module):
                roots = self.search_roots(path)
            module = self.from_module(path, found.level, found.module, roots)
            if module is None:
                continue
            if os.path.isfile(module):
                yield module
            for name in found.names:
                sub = self.submodule(module, name)
                if sub is not None and os.path.isfile(sub):
                    yield sub

    def from_module(self, importer: str, level: int, module: str, roots: Sequence[str] = ()) -> str | None:
        """The project module (a file, a package's ``__init__.py`` or a namespace directory)
        that ``from <level dots><module> import ...`` in ``importer`` takes names from; None
        for a library's (a modelled one is never the project's) or where none is found.
        ``roots``: ``importer``'s :meth:`search_roots`, where the caller has them."""
        if level:
            base = self.relative_base(importer, level)
            if base is None:
                return None
            parts = [part for part in module.split(".") if part]
            return self.child(base, parts) if parts else self.package_at(base)
        if not module or is_modeled(module):
            return None
        return self.module_path(module.split("."), roots or self.search_roots(importer))

    def star_modules(self, importer: str, sources: Sequence[tuple[int, str]]) -> list[str]:
        """The project's module files that the star imports ``sources`` (``(level, module)``
        each, in order) of ``importer`` take names from; a library's are left out."""
        found = []
        for level, module in sources:
            path = self.from_module(importer, level, module)
            if path is not None and os.path.isfile(path):
                found.append(path)
        return found

    def host_reachable(self, path: str) -> bool:
        """A host spelling in this module or in a project module it imports (transitively)."""
        return self._host_search(os.path.abspath(path), {}, [])[0]

    def _host_search(self, key: str, order: dict[str, int], open_modules: list[str]) -> tuple[bool, int]:
        """:meth:`host_reachable` of ``key`` within one search (Tarjan's: ``order`` numbers the
        modules met, ``open_modules`` those whose import cycle is not closed yet), and the
        lowest number of an open module the answer depends on. Modules that import each other
        share one answer, kept only once their cycle is closed (or once it is True, which no
        later import can undo): a False seen while the cycle was open is provisional."""
        stamp = self.stamp(key)
        cached = self._host.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1], sys.maxsize
        if key in order:  # open: its answer is still being searched
            return False, order[key]
        mine = low = order[key] = len(order)
        open_modules.append(key)
        facts = self.text_facts(key)
        self._read_facts(key, facts)
        found = facts.spells("host")
        if not found:
            for target in self.imported_files(key, facts):
                reached, lowest = self._host_search(os.path.abspath(target), order, open_modules)
                low = min(low, lowest)
                if reached:
                    found = True
                    break  # True is final: every open module on the way to here reaches it
        if found:
            self._host[key] = (stamp, True)
        elif low == mine:  # the cycle closes here, searched whole: none of its modules reaches one
            while True:
                member = open_modules.pop()
                self._host[member] = (self.stamp(member), False)
                if member == key:
                    break
        return found, low


def _listing_digest(directory: str) -> str:
    """The entries of a directory an import can find (``name.py`` files and ``name``
    directories), each with its kind, as one digest; "" when it cannot be listed. Other entries
    (``__pycache__``, an editor's swap file, a cache directory) change no answer."""
    import hashlib

    try:
        with os.scandir(directory) as entries:
            listing = sorted(
                f"{entry.name}/" if entry.is_dir() else entry.name
                for entry in entries
                if (entry.name.endswith(".py") and entry.name[:-3].isidentifier())
                or (entry.name.isidentifier() and entry.name != "__pycache__" and entry.is_dir())
            )
    except OSError:
        return ""
    return hashlib.sha256("\0".join(listing).encode("utf-8", "surrogateescape")).hexdigest()


def _stamp(path: str) -> Any:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size, status.st_ino)


def _decoded(data: bytes) -> str | None:
    """The module's text as the check reads a file's (:func:`python_spelling`: names as Python reads them)."""
    try:
        return python_spelling(decode(data)[0])
    except SourceDecodeError:
        return None
