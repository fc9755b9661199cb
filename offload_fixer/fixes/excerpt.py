"""The statements a fix needs, and only those: a libcst module built from some of a file's
top-level statements, edited, then spliced back into the file's text.

A fix edits one function, its jit site and perhaps the imports, yet libcst costs about 3 s
per MB to parse and as much again for positions, on every pass. So the file is cut into
top-level chunks with the static check's ``ast`` outline (:mod:`offload_fixer.static.outline`,
ten times cheaper than libcst), only the chunks the targets need are parsed, the codemods run
on that excerpt, and each changed chunk's new text replaces the old one in the file: every
byte of the other chunks stays as it was.

The chunks a set of targets needs: the first (header, docstring), every chunk with a
top-level import (aliases; new imports go after them), the chunks holding the targets' lines,
every chunk that names a target function (its jit sites) or a word its codemod reads the whole
file for (:attr:`~offload_fixer.codemods.targets.FunctionTarget.file_words`), and, following module-level names
those chunks read, the chunks that bind them (the shardings, meshes and trees the codemods
copy; all of a name's bindings, since "bound once" is part of what they check).

Positions in the excerpt are its own lines; :meth:`Excerpt.file_line` maps them back, so
that the codemods can report file lines (``FixCommand(line_map=...)``).
"""

from __future__ import annotations

import ast
import bisect
import difflib
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import libcst as cst

from offload_fixer.codemods.source_facts import count_references
from offload_fixer.codemods.targets import FunctionTarget
from offload_fixer.fixes.errors import SourceSyntaxError
from offload_fixer.fixes.source_io import parse_source
from offload_fixer.fixes.splice import splice
from offload_fixer.source.decoding import libcst_view
from offload_fixer.source.lines import first_line
from offload_fixer.source.python_version import only_newer_syntax
from offload_fixer.static.outline import NEWLINE, Outline, outline
from offload_fixer.static.pruning import Member, Pruned, blank_unreached
from offload_fixer.static.source import assemble_chunks

_NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_KEPT_OUTLINES = 2


def target_lines(target: FunctionTarget) -> list[int]:
    """Every file line a target points at: the statements its codemod must see."""
    return [line for _, line in target.lines()]


def target_function_names(target: FunctionTarget) -> list[str]:
    return [target.function_name.rsplit(".", 1)[-1]] if target.function_name else []


class FileOutline:
    """A file's text cut into top-level chunks, with what choosing chunks needs: their lines,
    the module-level names each binds, and (lazily) the names each reads. :meth:`of` keeps the
    last few, so planning and applying a fix cut a file once."""

    _recent: ClassVar[OrderedDict[tuple[str, str], FileOutline]] = OrderedDict()

    @classmethod
    def of(cls, path: str, text: str, found_outline: Outline | None = None) -> FileOutline:
        """The outline of ``text`` as libcst reads it (:func:`~offload_fixer.source.decoding.libcst_view`:
        form feeds in indentation cut), kept; ``found_outline``: one the static check already made."""
        text = libcst_view(text)
        key = (path, text)
        found = cls._recent.get(key)
        if found is None:
            found = cls._recent[key] = cls(path, text, found_outline)
            while len(cls._recent) > _KEPT_OUTLINES:
                cls._recent.popitem(last=False)
        else:
            cls._recent.move_to_end(key)
        return found

    def __init__(self, path: str, text: str, found: Outline | None = None) -> None:
        """Raises :class:`SourceSyntaxError` for a text that is not Python."""
        self.path = path
        self.text = text
        try:
            if found is None or found.text != text:
                found = outline(text)
        except SyntaxError as exc:
            if not only_newer_syntax(exc, text):
                raise SourceSyntaxError(path, f"does not parse: {exc.msg}", exc.lineno or 1, exc.offset or 1) from exc
            # a newer Python's syntax than this interpreter's ``ast`` reads: the file is one
            # chunk, read by libcst alone
            found = Outline(text, [], None)
        except ValueError as exc:  # a null byte
            raise SourceSyntaxError(path, f"does not parse: {exc}", 1, 1) from exc
        self.spans: list[tuple[int, int]] | None = found.spans
        self.groups = found.groups
        self.file_lines = found.file_lines
        self._line_starts: list[int] | None = None
        self._loads: dict[int, frozenset[str]] = {}
        self._references: dict[str, int] = {}
        self._excerpts: dict[tuple[Any, ...], Excerpt] = {}
        self._pruned: dict[tuple[Any, ...], dict[int, Pruned]] = {}
        self._excerpts_for: dict[tuple[FunctionTarget, ...], Excerpt] = {}
        self._pruning_memo: dict[Any, Any] = {}
        """What :func:`~offload_fixer.static.pruning.blank_unreached` reads of each chunk, kept."""
        if self.spans is None:
            return
        self.first_lines: list[int] = []
        line = 1
        for start, end in self.spans:
            self.first_lines.append(line)
            line += len(NEWLINE.findall(text, start, end))
        self.starts = [start for start, _ in self.spans]
        self.binders: dict[str, list[int]] = {}
        self.value_names: set[str] = set()
        """Names some module-level statement binds other than by ``def``/``class``."""
        self.import_chunks: list[int] = []
        for index, group in enumerate(self.groups):
            for statement in group:
                for name, is_value in _module_bindings(statement):
                    self.binders.setdefault(name, []).append(index)
                    if is_value:
                        self.value_names.add(name)
                if _has_import(statement):
                    self.import_chunks.append(index)

    # ------------------------------------------------------------------ choosing chunks
    def needed(self, targets: Iterable[FunctionTarget]) -> frozenset[int]:
        if self.spans is None:
            return frozenset({0})
        targets = list(targets)
        chosen = {0, *self.import_chunks}
        for target in targets:
            for line in target_lines(target):
                chosen.add(self.chunk_of_line(line))
            for word in target.file_words:
                chosen.update(self.mentions(word))
        for name in self._searched_names(chosen, targets):
            chosen.update(self.mentions(name))
        queue = list(chosen)
        followed: set[str] = set()
        while queue:
            for name in self.loads(queue.pop()):
                if name in followed or name not in self.value_names:
                    continue
                followed.add(name)
                for index in self.binders.get(name, ()):
                    if index not in chosen:
                        chosen.add(index)
                        queue.append(index)
        return frozenset(chosen)

    def chunk_of_line(self, line: int) -> int:
        return max(bisect.bisect_right(self.first_lines, line) - 1, 0)

    def mentions(self, name: str) -> set[int]:
        """Chunks whose text has ``name`` as a word (a superset of those that use it)."""
        assert self.spans is not None
        return {
            bisect.bisect_right(self.starts, match.start()) - 1
            for match in re.finditer(rf"(?<![\w.]){re.escape(name)}\b|\.\s*{re.escape(name)}\b", self.text)
        }

    def loads(self, index: int) -> frozenset[str]:
        found = self._loads.get(index)
        if found is None:
            found = self._loads[index] = frozenset(
                node.id
                for statement in self.groups[index]
                for node in ast.walk(statement)
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
            )
        return found

    def _searched_names(self, chosen: Iterable[int], targets: Sequence[FunctionTarget]) -> set[str]:
        """The functions whose mentions a fix of ``targets`` needs: the target functions and
        those holding their lines, except a function defined inside another one, whose name
        only its enclosing function can read (a test's ``def f``: every test has one)."""
        lines = [line for t in targets for line in target_lines(t)]
        outer: set[str] = set()
        nested: set[str] = set()
        for index in chosen:
            found_outer, found_nested = self._functions_at(index, lines)
            outer |= found_outer
            nested |= found_nested
        return outer | {name for t in targets for name in target_function_names(t) if name not in nested - outer}

    def _functions_at(self, index: int, lines: Sequence[int]) -> tuple[set[str], set[str]]:
        """Names of the functions in chunk ``index`` whose lines hold one of ``lines``: those
        not inside another function, and those inside one."""
        outer: set[str] = set()
        nested: set[str] = set()
        stack: list[tuple[ast.AST, bool]] = [(statement, False) for statement in self.groups[index]]
        while stack:
            node, inside = stack.pop()
            end = getattr(node, "end_lineno", None)
            if end is not None:  # a statement or expression: skipped unless it holds a line
                decorators = getattr(node, "decorator_list", ())
                start = min([node.lineno, *(d.lineno for d in decorators)])  # type: ignore[attr-defined]
                if not any(start <= line <= end for line in lines):
                    continue
            is_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if is_function:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])  # type: ignore[attr-defined]
                if any(first <= line <= (node.end_lineno or node.lineno) for line in lines):  # type: ignore[attr-defined]
                    (nested if inside else outer).add(node.name)  # type: ignore[attr-defined]
            stack.extend(
                (child, inside or is_function or isinstance(node, ast.Lambda)) for child in ast.iter_child_nodes(node)
            )
        return outer, nested

    def reference_count(self, name: str) -> int:
        """How often ``name`` is written as a plain name in the whole file (what
        ``SourceFacts.references`` counts in a whole-file module)."""
        if name not in self._references:
            if not self.groups:  # no ``ast`` outline (newer syntax): libcst's names of the whole file
                self._references[name] = count_references(self.excerpt(frozenset({0})).module, name)
                return self._references[name]
            if self.spans is None:
                chunks = [0]
                statements = [s for group in self.groups for s in group]
            else:
                chunks = sorted(self.mentions(name))
                statements = [s for index in chunks for s in self.groups[index]]
            self._references[name] = sum(_name_occurrences(statement, name) for statement in statements)
        return self._references[name]

    # ------------------------------------------------------------------ excerpts
    def excerpt(self, chunks: frozenset[int], pruned: Mapping[int, Pruned] | None = None) -> Excerpt:
        """The libcst module of ``chunks`` (all of the file when it cannot be cut); ``pruned``:
        by chunk, a text parsed instead of the chunk's (:meth:`pruned`)."""
        key = (chunks, tuple(sorted((index, found.text) for index, found in (pruned or {}).items())))
        found = self._excerpts.get(key)
        if found is None:
            found = self._excerpts[key] = self._build(chunks, pruned or {})
        return found

    def excerpt_for(self, targets: Iterable[FunctionTarget]) -> Excerpt:
        key = tuple(targets)
        found = self._excerpts_for.get(key)
        if found is None:
            chunks = self.needed(key)
            found = self._excerpts_for[key] = self.excerpt(chunks, self.pruned(chunks, key))
        return found

    def pruned(self, chunks: frozenset[int], targets: Sequence[FunctionTarget]) -> dict[int, Pruned]:
        """The chunks holding a test class with the ``test*`` methods the targets do not need
        blanked (:mod:`offload_fixer.static.pruning`): a method is needed when it holds a
        target's line or names a target function, or, following names, those need it.
        Splicing a fixed excerpt back keeps every blanked line's text
        (:func:`~offload_fixer.fixes.splice.splice`), and :func:`~offload_fixer.fixes.apply.check_intended`
        checks that each blanked method is in the fixed file as it was."""
        if self.spans is None or not self.file_lines or len(chunks) == len(self.spans):
            return {}
        key = (chunks, tuple(targets))
        found = self._pruned.get(key)
        if found is None:
            found = self._pruned[key] = self._prune(chunks, targets)
        return found

    def _prune(self, chunks: frozenset[int], targets: Sequence[FunctionTarget]) -> dict[int, Pruned]:
        lines = [line for target in targets for line in target_lines(target)]
        names = self._searched_names(chunks, targets)

        def seeds(index: int, members: list[Member]) -> set[int]:
            # A method of the class is followed by name through the flow; another name is
            # looked for in each method's text.
            own = {m.method.name for m in members if m.method is not None}
            words = [name for name in names if name not in own]
            word = re.compile("|".join(rf"\b{re.escape(name)}\b" for name in words)) if words else None
            found = set()
            for position, member in enumerate(members):
                method = member.method
                if method is None:
                    continue
                first, last = first_line(method), method.end_lineno or method.lineno
                if any(first <= line <= last for line in lines) or (
                    word is not None and word.search(member.text) is not None
                ):
                    found.add(position)
            return found

        return blank_unreached(
            {index: self.groups[index] for index in chunks},
            lambda index: self.text[self.spans[index][0] : self.spans[index][1]],  # type: ignore[index]
            lambda index: self.first_lines[index] - 1,
            seeds,
            self._pruning_memo,
            marked=True,
        )

    def _build(self, chunks: frozenset[int], pruned: Mapping[int, Pruned]) -> Excerpt:
        if self.spans is not None and len(chunks) < len(self.spans):
            order = sorted(chunks)
            replaced = {position: pruned[index].text for position, index in enumerate(order) if index in pruned}
            parsed = assemble_chunks(self.text, [self.spans[i] for i in order], replaced)
            if parsed is not None:
                return Excerpt(
                    self,
                    tuple(order),
                    parsed.module,
                    [self.first_lines[i] for i in order],
                    [offset + 1 for offset, _ in parsed.pieces],
                    tuple(method for found in pruned.values() for method in found.dropped),
                )
        return Excerpt(self, (), parse_source(self.path, self.text), [1], [1])


@dataclass
class Excerpt:
    """Some chunks of a file as one libcst module. ``chunks`` empty: the whole file."""

    source: FileOutline
    chunks: tuple[int, ...]
    module: cst.Module
    file_starts: list[int]
    """File line of each chunk's first line."""
    excerpt_starts: list[int]
    """Excerpt line of each chunk's first line."""
    blanked: tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...] = ()
    """The file's test methods whose lines the excerpt leaves empty (:meth:`FileOutline.pruned`)."""

    @property
    def whole(self) -> bool:
        return not self.chunks

    def file_line(self, line: int) -> int:
        index = max(bisect.bisect_right(self.excerpt_starts, line) - 1, 0)
        return self.file_starts[index] + line - self.excerpt_starts[index]

    def excerpt_line(self, line: int | None) -> int | None:
        if line is None:
            return None
        index = max(bisect.bisect_right(self.file_starts, line) - 1, 0)
        return self.excerpt_starts[index] + line - self.file_starts[index]

    def splice(self, fixed: cst.Module) -> tuple[str, list[str]]:
        """The file's text with the chunks whose statement ``fixed`` changed rewritten (an added
        statement, such as an import, joins the chunk before it), and those chunks' new texts.
        Statements are matched by their code: a codemod pass rebuilds unchanged nodes too. In a
        changed chunk only the lines the fix changed come from libcst's print
        (:func:`~offload_fixer.fixes.splice.splice`)."""
        if self.whole:
            text = splice(self.source.text, self.module.code, fixed.code)
            return text, [text]
        old_codes = [self.module.code_for_node(statement) for statement in self.module.body]
        new_codes = [fixed.code_for_node(statement) for statement in fixed.body]
        belongs: list[list[str]] = [[code] for code in old_codes]
        # Matched by identity (a def or class by its name, anything else by its code), so that
        # two functions a fix changed, beside an import it added, each stay in their own chunk:
        # the chunks of an excerpt need not be neighbours in the file.
        old_keys = [_statement_key(statement, code) for statement, code in zip(self.module.body, old_codes)]
        new_keys = [_statement_key(statement, code) for statement, code in zip(fixed.body, new_codes)]
        matcher = difflib.SequenceMatcher(None, old_keys, new_keys, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "insert":
                at = max(i1 - 1, 0)
                belongs[at] = [*new_codes[j1:j2], *belongs[at]] if i1 == 0 else [*belongs[at], *new_codes[j1:j2]]
                continue
            if tag in ("equal", "replace") and i2 - i1 == j2 - j1:
                for offset in range(i2 - i1):
                    belongs[i1 + offset] = [new_codes[j1 + offset]]
                continue
            for index in range(i1, i2):
                belongs[index] = []
            if tag == "replace":
                # Unequal counts: statements a fix added come first (imports), then one
                # statement per old chunk from the end, so no statement moves to a chunk
                # before another chunk it followed.
                paired = min(i2 - i1, j2 - j1)
                extra = new_codes[j1 : j2 - paired]
                for offset in range(paired):
                    belongs[i2 - paired + offset] = [new_codes[j2 - paired + offset]]
                if extra:
                    first = i2 - paired if paired else i1
                    belongs[first] = [*extra, *belongs[first]]
        header = "".join(fixed.code_for_node(line) for line in fixed.header)
        footer = "".join(fixed.code_for_node(line) for line in fixed.footer)
        old_header = "".join(self.module.code_for_node(line) for line in self.module.header)
        old_footer = "".join(self.module.code_for_node(line) for line in self.module.footer)
        spans = self.source.spans
        assert spans is not None
        text = self.source.text
        pieces, changed = [], []
        last = 0
        for index, codes in enumerate(belongs):
            chunk = self.chunks[index]
            start, end = spans[chunk]
            last_chunk = chunk == len(spans) - 1
            code = (header if chunk == 0 else "") + "".join(codes) + (footer if last_chunk else "")
            reprinted = (old_header if chunk == 0 else "") + old_codes[index] + (old_footer if last_chunk else "")
            if last_chunk and not fixed.has_trailing_newline:
                code = _without_final_newline(code)
            if last_chunk and not self.module.has_trailing_newline:
                reprinted = _without_final_newline(reprinted)
            code = splice(text[start:end], reprinted, code)  # libcst's print only where the fix changed it
            if code == text[start:end]:
                continue
            pieces += [text[last:start], code]
            changed.append(code)
            last = end
        pieces.append(text[last:])
        return "".join(pieces), changed


def _statement_key(statement: cst.CSTNode, code: str) -> tuple[str, str]:
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return (type(statement).__name__, statement.name.value)
    return ("code", code)


def _without_final_newline(code: str) -> str:
    match = re.search(r"(\r\n|\r|\n)\Z", code)
    return code[: match.start()] if match else code


def _module_bindings(statement: ast.stmt) -> Iterable[tuple[str, bool]]:
    """(name, bound by something other than def/class) for the module-level names a top-level
    statement binds, looking into ``if``/``try``/``with``/``for`` blocks but not into functions
    and classes."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield statement.name, False
        return
    stack: list[ast.AST] = [statement]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, False
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            yield node.id, True
        elif isinstance(node, ast.alias):
            yield (node.asname or node.name.split(".")[0]), True
        elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            yield node.target.id, True
        elif isinstance(node, ast.ExceptHandler) and node.name:
            yield node.name, True
        stack.extend(ast.iter_child_nodes(node))


def _has_import(statement: ast.stmt) -> bool:
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(statement, _NESTED_SCOPES):
        return False
    return any(_has_import(child) for child in ast.iter_child_nodes(statement) if isinstance(child, ast.stmt))


def _name_occurrences(statement: ast.AST, name: str) -> int:
    """Plain-name uses and bindings of ``name`` (reads, stores, ``def``/``class``/parameter
    names, import aliases): libcst ``Name`` nodes other than attributes and keywords."""
    count = 0
    for node in ast.walk(statement):
        if isinstance(node, ast.Name):
            count += node.id == name
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            count += node.name == name
        elif isinstance(node, ast.arg):
            count += node.arg == name
        elif isinstance(node, ast.alias):
            count += (node.asname or node.name.split(".")[0]) == name
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            count += node.names.count(name)
    return count
