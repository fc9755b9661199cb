"""Which test methods of a candidate class no host value can reach: libcst never parses them.

:mod:`.candidates` decides by top-level statement, and a test class is one statement: a
class of 400 ``test_*`` methods, of which three offload, is a candidate as a whole, and
parsing it with libcst is most of a check of a repository's tests (JAX's
``tests/pjit_test.py``, 12,000 lines, two seconds). Here the same reasoning goes one level
down. Only methods named ``test*`` are dropped: a test runner finds them by name and nothing
in the program calls them unless it names them, which the flow below sees. Every other
method (``setUp``, helpers, ``__call__``, ``tree_flatten``) stays, as do the statements of the
class body that are not methods.

The identifiers of a class flow as values do, by name (over-approximating the interpreter:
no scopes, any spelling counts). A method *defines* its own name and every attribute it
stores (``self.x = ...``); the class body's other statements define what they bind. A host
value can reach a member (it is *tainted*) when

* its text spells a host memory kind, an offload policy or ``compute_on``, or it reads a
  module-level name that may hold a host value (:func:`.candidates.reads_host`), or another
  candidate statement of the module reads a name it defines or stores an attribute it reads;
* it reads a name a tainted member defines (a return value, a stored attribute), or a
  tainted member reads its name (a call passes it arguments).

What a kept member reads, transitively, is kept too, tainted or not: a test that jits the
result of a helper needs the helper. A method that reads attributes by computed names
(``getattr(self, ...)``, ``vars``, ``__dict__``) keeps its whole class. The dropped methods'
lines are blanked, not removed, so every line and column of what libcst parses is the file's,
and a finding reads as it does when the whole class is parsed. ``check`` and the language
server prune alike: a document's outline keeps the ``ast`` of earlier versions for the
statements an edit left alone, so a class's lines are counted from its own first line
(:meth:`.project.ModuleFacts.lines_before_in_ast`); an edit to a dropped method leaves the
pruned text as it was, and its parse is the cached one.
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from offload_fixer.source.lines import first_line

from .candidates import reads_host
from .outline import NEWLINE
from .project import ModuleFacts, Project
from .statement_reads import HOST_WORDS, group_identifiers, is_test

PRUNABLE_PREFIX = "test"
_BY_COMPUTED_NAME = frozenset({"getattr", "setattr", "delattr", "hasattr"})
_OWN = frozenset({"self", "cls"})
BLANKED_LINE = "#~offload-fixer-blanked:"
"""How a marked blanked line starts (its line number follows)."""


class Member:
    """One method of the class, or (``method`` None) the class body's other statements."""

    def __init__(self, statements: Sequence[ast.stmt], text: str, method: ast.FunctionDef | None) -> None:
        self.method = method
        self.text = text
        self.reads: set[str] = set()
        self.module_reads: list[tuple[str, tuple[str, ...]]] = []
        """Each plain name loaded, with the attributes read from it, for :func:`reads_host`."""
        self.imports: list[ast.Import | ast.ImportFrom] = []
        self.defines: set[str] = {method.name} if method is not None else set()
        self.stores: set[str] = set()
        self.computed_names = False
        """It reaches the attributes of ``self``/``cls`` by computed names, or an object's ``vars``."""
        local_imports: list[str] = []
        declares_global = False
        stack: list[ast.AST] = list(statements)
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is ast.Name:
                if type(node.ctx) is ast.Load:  # type: ignore[attr-defined]
                    self.reads.add(node.id)  # type: ignore[attr-defined]
                    self.module_reads.append((node.id, ()))  # type: ignore[attr-defined]
                elif method is None:  # the class body binds it: a class attribute
                    self.defines.add(node.id)  # type: ignore[attr-defined]
                continue
            if kind is ast.Attribute:
                # A chain read whole (``utils.helper``), as :mod:`.candidates` reads it.
                chain: list[str] = []
                base: ast.AST = node
                while type(base) is ast.Attribute:
                    attribute = base.attr
                    chain.append(attribute)
                    if attribute == "__dict__":
                        self.computed_names = True
                    if type(base.ctx) is ast.Load:
                        self.reads.add(attribute)
                    else:
                        self.stores.add(attribute)
                    base = base.value
                if type(base) is ast.Name:
                    self.reads.add(base.id)
                    self.module_reads.append((base.id, tuple(reversed(chain))))
                else:
                    stack.append(base)
                continue
            if kind is ast.Call:
                callee, arguments = node.func, node.args  # type: ignore[attr-defined]
                if type(callee) is ast.Name and (
                    callee.id == "vars"
                    or (
                        callee.id in _BY_COMPUTED_NAME
                        and not (arguments and type(arguments[0]) is ast.Name and arguments[0].id not in _OWN)
                    )
                ):
                    self.computed_names = True
            elif kind is ast.Import or kind is ast.ImportFrom:
                self.imports.append(node)  # type: ignore[arg-type]
                # A method's import binds a local name, which no other member sees (unless a
                # ``global`` statement makes it the module's); the class body's, a class attribute.
                local_imports.extend(alias.asname or alias.name.split(".")[0] for alias in node.names)  # type: ignore[attr-defined]
            elif kind is ast.Global:
                declares_global = True
            elif method is None and kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                self.defines.add(node.name)  # type: ignore[attr-defined]
            stack.extend(ast.iter_child_nodes(node))
        if method is None or declares_global:
            self.defines.update(local_imports)
        self.defines |= self.stores
        self.spells_host = HOST_WORDS.search(text) is not None

    @property
    def prunable(self) -> bool:
        return self.method is not None and self.method.name.startswith(PRUNABLE_PREFIX)


def pruned_pieces(
    facts: ModuleFacts,
    project: Project | None,
    importer: str | None,
    candidates: Sequence[int],
    tests_only: Mapping[int, frozenset[str]] | None = None,
) -> dict[int, str]:
    """The text of each candidate statement group with a class whose unreachable ``test*``
    methods are blanked, by group index (groups with nothing to prune are left out).
    ``tests_only``: candidates read for their eager code alone, each a class whose value the
    interpreter never knows (:func:`.candidates.opaque_classes`), with the test methods
    :func:`reached_tests` names: every other method is blanked, as nothing but those tests,
    run with an unknown ``self``, reads the class body."""
    if facts.outline.spans is None:
        return {}

    def host_seeds(index: int, members: list[Member]) -> set[int]:
        reads = [(member.module_reads, member.imports) for member in members]
        return {i for i, member in enumerate(members) if member.spells_host} | reads_host(
            facts, project, importer, index, reads
        )

    groups = {index: facts.outline.groups[index] for index in candidates}
    memo = {("identifiers", index): group_identifiers(facts, index) for index in candidates}
    found = {
        index: pruned.text
        for index, pruned in blank_unreached(groups, facts.piece, facts.lines_before_in_ast, host_seeds, memo).items()
    }
    for index, tests in (tests_only or {}).items():
        shape = facts.class_shape(index)
        if shape is None:
            continue
        cls, offset = shape
        lines = _lines(facts.piece(index))
        members = _members(cls, lines, offset)
        if members is None:
            continue
        dropped = [m.method for m in members if m.method is not None and m.method.name not in tests]
        if dropped:
            spans = [(first_line(m) - offset, (m.end_lineno or m.lineno) - offset) for m in dropped]
            found[index] = _blanked(lines, spans, marked=False)
    return found


def reached_tests(
    facts: ModuleFacts, project: Project | None, importer: str | None, candidates: Sequence[int]
) -> dict[int, frozenset[str]]:
    """For each of the ``candidates`` (eager ones, :func:`.candidates.eager_candidates`) that
    is a class with test methods: the names of the test methods a host value can reach when a
    test runner calls them. :mod:`.eager` runs a test method with the module's names and
    nothing of its instance (``self`` is unknown), so a host value reaches one only as it
    reaches a seed of the flow here: the method spells a host memory kind, an offload policy
    or ``compute_on``, or it reads (or imports) what may hold a host value, or a name the
    class statement binds (its own class, whose attributes the interpreter knows where the
    class is a plain one). A class whose methods cannot be told apart line by line gives all
    its test methods."""
    if facts.outline.spans is None:
        return {}
    found: dict[int, frozenset[str]] = {}
    for index in candidates:
        shape = facts.class_shape(index)
        if shape is None or not any(is_test(member) for member in shape[0].body):
            continue
        cls, offset = shape
        members = _members(cls, _lines(facts.piece(index)), offset)
        if members is None:
            found[index] = frozenset(member.name for member in cls.body if is_test(member))  # type: ignore[attr-defined]
            continue
        tests = [member for member in members if member.method is not None and is_test(member.method)]
        reaching = reads_host(facts, project, importer, index, [(m.module_reads, m.imports) for m in tests])
        bound = {name for name, binders in facts.binders.items() if index in binders}
        found[index] = frozenset(
            member.method.name  # type: ignore[union-attr]
            for position, member in enumerate(tests)
            if member.spells_host or position in reaching or not bound.isdisjoint(member.reads)
        )
    return found


@dataclass(frozen=True)
class Pruned:
    """A statement group's text with some methods blanked, and those methods' ``ast`` nodes."""

    text: str
    dropped: tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...]


def blank_unreached(
    groups: Mapping[int, Sequence[ast.stmt]],
    piece: Callable[[int], str],
    line_offset: Callable[[int], int],
    seeds: Callable[[int, list[Member]], set[int]],
    memo: dict[Any, Any] | None = None,
    marked: bool = False,
) -> dict[int, Pruned]:
    """For each of ``groups`` (top-level statement groups by index, their texts ``piece(index)``
    starting after ``line_offset(index)`` lines of the file) holding a class with ``test*``
    methods, its text with those no seed reaches blanked; ``seeds(index, members)`` says
    which members of a class start the flow. ``memo``: what is read of each group, kept
    between calls over the same groups. ``marked``: each blanked line is a comment of its
    own, so that a line diff of an edited text never takes one for another."""
    memo = {} if memo is None else memo
    classes = {
        index: [s for s in statements if isinstance(s, ast.ClassDef) and _has_prunable(s)]
        for index, statements in groups.items()
    }
    classes = {index: found for index, found in classes.items() if found}
    if not classes:
        return {}
    identifiers = {}
    for index, statements in groups.items():
        found_identifiers = memo.get(("identifiers", index))
        if found_identifiers is None:
            found_identifiers = memo[("identifiers", index)] = _identifiers(statements)
        identifiers[index] = found_identifiers
    pruned = {}
    for index, found in classes.items():
        text = piece(index)
        lines = _lines(text)
        offset = line_offset(index)
        read_elsewhere = set().union(*(r for i, (r, _) in identifiers.items() if i != index))
        stored_elsewhere = set().union(*(s for i, (_, s) in identifiers.items() if i != index))
        blank: list[tuple[int, int]] = []
        dropped_here: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        for cls in found:
            key = ("members", id(cls))
            if key not in memo:
                memo[key] = (cls, _members(cls, lines, offset))  # the class kept: its id stays its own
            members = memo[key][1]
            if members is None:
                continue
            kept = _kept(members, seeds(index, members), read_elsewhere, stored_elsewhere)
            if kept is None:
                continue
            dropped = [m.method for i, m in enumerate(members) if i not in kept and m.prunable and m.method]
            if len(dropped) == len(cls.body):
                dropped = dropped[1:]  # a class body keeps a statement
            blank.extend((first_line(m) - offset, (m.end_lineno or m.lineno) - offset) for m in dropped)
            dropped_here.extend(dropped)
        if blank:
            pruned[index] = Pruned(_blanked(lines, blank, marked), tuple(dropped_here))
    return pruned


def _has_prunable(cls: ast.ClassDef) -> bool:
    return any(
        isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name.startswith(PRUNABLE_PREFIX) for s in cls.body
    )


def _identifiers(statements: Sequence[ast.stmt]) -> tuple[set[str], set[str]]:
    """(names and attributes read, attributes stored) anywhere in ``statements``."""
    reads: set[str] = set()
    stores: set[str] = set()
    for statement in statements:
        for node in ast.walk(statement):
            if type(node) is ast.Name and type(node.ctx) is ast.Load:
                reads.add(node.id)
            elif type(node) is ast.Attribute:
                (reads if type(node.ctx) is ast.Load else stores).add(node.attr)
    return reads, stores


def _lines(text: str) -> list[str]:
    """The lines of ``text`` with their ends, as ``ast`` and libcst count them."""
    lines, start = [], 0
    for match in NEWLINE.finditer(text):
        lines.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


_METHODS: weakref.WeakKeyDictionary[ast.stmt, Member] = weakref.WeakKeyDictionary()
"""Each method's :class:`Member`, by its node: a document's outline keeps the methods an edit
left alone (:mod:`.class_members`), whose text is the same."""


def _members(cls: ast.ClassDef, lines: list[str], offset: int) -> list[Member] | None:
    """The class's methods and (last) its other statements; None when a method cannot be
    blanked alone: it shares a line with another statement, or the outline's lines are not
    where the text has them."""
    methods: list[Member] = []
    rest: list[ast.stmt] = []
    body = cls.body
    for position, statement in enumerate(body):
        if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            rest.append(statement)
            continue
        first, last = first_line(statement) - offset, (statement.end_lineno or statement.lineno) - offset
        if not 1 <= first <= last <= len(lines):
            return None
        if position and (body[position - 1].end_lineno or 0) - offset >= first:
            return None
        if position + 1 < len(body) and body[position + 1].lineno - offset <= last:
            return None
        head = lines[first - 1].lstrip()
        if not head.startswith(("@", "def", "async")):
            return None
        member = _METHODS.get(statement)
        if member is None:
            member = _METHODS[statement] = Member([statement], "".join(lines[first - 1 : last]), statement)  # type: ignore[arg-type]
        methods.append(member)
    rest_text = "".join("".join(lines[s.lineno - offset - 1 : (s.end_lineno or s.lineno) - offset]) for s in rest)
    return [*methods, Member(rest, rest_text, None)]


def _kept(
    members: list[Member], seeds: set[int], read_elsewhere: set[str], stored_elsewhere: set[str]
) -> set[int] | None:
    """Indices of the members the flow from ``seeds`` reaches and of what they read,
    transitively; None when one of them reaches attributes by computed names."""
    definers: dict[str, list[int]] = {}
    readers: dict[str, list[int]] = {}
    for index, member in enumerate(members):
        for name in member.defines:
            definers.setdefault(name, []).append(index)
        for name in member.reads:
            readers.setdefault(name, []).append(index)
    stack = [
        index
        for index, member in enumerate(members)
        if index in seeds or member.defines & read_elsewhere or member.reads & stored_elsewhere
    ]
    tainted: set[int] = set()
    while stack:
        index = stack.pop()
        if index in tainted:
            continue
        tainted.add(index)
        member = members[index]
        for name in member.defines:
            stack.extend(readers.get(name, ()))
        for name in member.reads:
            stack.extend(i for i in definers.get(name, ()) if getattr(members[i].method, "name", None) == name)
    kept = set(tainted)
    stack = [*tainted, *(i for i, m in enumerate(members) if not m.prunable)]
    while stack:
        index = stack.pop()
        kept.add(index)
        if members[index].computed_names:
            return None
        for name in members[index].reads:
            stack.extend(i for i in definers.get(name, ()) if i not in kept)
    return kept


def _blanked(lines: list[str], spans: list[tuple[int, int]], marked: bool) -> str:
    """``lines`` with those of each (first, last) span (1-based, inclusive) left empty, or
    (``marked``) each made a comment of its own number (:data:`BLANKED_LINE`), indented as the
    method was."""
    out = list(lines)
    for first, last in spans:
        head = out[first - 1]
        indent = head[: len(head) - len(head.lstrip(" \t"))]  # the method's: libcst keeps the comments in the class
        for number in range(first, last + 1):
            line = out[number - 1]
            end = line[len(line.rstrip("\r\n")) :]
            out[number - 1] = f"{indent}{BLANKED_LINE}{number}{end}" if marked else end
    return "".join(out)
