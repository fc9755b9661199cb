"""What the ``ast`` of one top-level statement group tells :mod:`.candidates` and
:mod:`.pruning`: the names it reads (with the attributes read from them), its imports, whether
it spells a jit or a host memory kind, and the attribute names it reads and stores. Kept per
module (``ModuleFacts.memo``), and in place of the ``ast`` of a project's module
(:func:`keep_groups_only`).
"""

from __future__ import annotations

import ast
import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from offload_fixer.source.lines import first_line

from .names import JIT
from .prefilter import COMPUTE_ON_WORD, HOST_SPELLING, JIT_MARKER, OFFLOAD_SPELLING, POLICY_NAMES, host_kinds_in

if TYPE_CHECKING:
    from .project import ModuleFacts

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
JIT_ATTRIBUTES = frozenset(qualname.rsplit(".", 1)[1] for qualname in JIT)
"""``jit``/``pjit``: the last name of every qualified name of :data:`.names.JIT`, so an attribute
read that can give one (``jax.jit``, ``pjit_module.pjit``) reads one of these."""
_JIT_STRING = re.compile(r"""["']p?jit["']""")
"""``"jit"`` as a string (``getattr(jax, "jit")``)."""
HOST_WORDS = re.compile(f"{HOST_SPELLING.pattern}|{OFFLOAD_SPELLING.pattern.decode()}")
"""The prefilter's words, in a statement's text: a host memory kind, an offload policy (whose
destination :mod:`.policies` checks) or ``compute_on``."""


def group_identifiers(facts: ModuleFacts, index: int) -> tuple[set[str], set[str]]:
    """(the names and attribute names group ``index`` reads, the attribute names it stores),
    from the walk the candidates made of it."""
    group = group_of(facts, index)
    return {name for name, _ in group.reads} | group.attributes_read, group.attributes_stored


def keep_groups_only(facts: ModuleFacts) -> None:
    """What the candidates read of each statement group of a project's module, kept in place
    of its ``ast`` (:meth:`.outline.Outline.compact`): the resolution of a run reads most groups
    of the modules it opens, and their trees were most of its memory."""
    if facts.outline.spans is None:
        return
    for index in range(len(facts.outline.groups)):
        group_of(facts, index)
    facts.outline = facts.outline.compact()


def keep_jit_groups_only(facts: ModuleFacts) -> None:
    """What the candidates read of each statement group of the checked file, and the ``ast``
    of the groups that spell jit (those :mod:`.pruning` reads), kept; the trees of the others
    are let go before the project's modules are read and the file's statements parsed with
    libcst, which then reuse their memory: a worker's peak on axlearn's ``attention_test.py``,
    78 MiB with its whole tree, is 73. A candidate that does not spell jit (one that calls a
    jit made elsewhere) is parsed again by ``ast`` if pruning reads it: 86 kB in all of JAX,
    Flax, Optax, axlearn and maxtext."""
    if facts.outline.spans is None:
        return
    facts.outline.release([index for index in range(len(facts.outline.groups)) if group_of(facts, index).mentions_jit])


GROUPS = "jit_groups"
"""Where each group's :class:`Group` is kept in its facts' ``memo``, by index."""


def group_of(facts: ModuleFacts, index: int) -> Group:
    groups = facts.memo.setdefault(GROUPS, {})  # the facts' alone: kept with them
    found = groups.get(index)
    if found is None:
        found = groups[index] = Group(facts.outline.groups[index], facts.piece(index))
    return found


_ANNOTATIONS = frozenset({"annotation", "returns"})
"""The fields of ``arg``, ``AnnAssign`` and ``FunctionDef`` that hold annotations."""

_LEAVES = frozenset(
    {
        ast.Constant,
        *(
            kind
            for kind in vars(ast).values()
            if isinstance(kind, type) and issubclass(kind, ast.AST) and not kind._fields
        ),
    }
)
"""Nodes with nothing a group reads: constants, contexts (``Load``) and operators."""


class _Reads:
    """What a walk of some statements found read, imported and stored."""

    def __init__(self) -> None:
        self.reads: list[tuple[str, tuple[str, ...]]] = []
        """Each name loaded, in any scope, with the attributes read from it (``utils.helper``),
        once, in the order first read."""
        self.value_reads: list[tuple[str, tuple[str, ...]]] = []
        """The reads outside the methods of classes: a class's value is its fields' defaults
        (a dataclass's), never its methods."""
        self.imports: list[ast.Import | ast.ImportFrom] = []
        """Imports at module level (in ``if``/``try`` too)."""
        self.nested_imports: list[ast.Import | ast.ImportFrom] = []
        self.attributes_read: set[str] = set()
        self.attributes_stored: set[str] = set()
        """Attribute names read and stored anywhere (:mod:`.pruning` follows them)."""
        self._seen: set[tuple[str, tuple[str, ...]]] = set()
        self._seen_in_value: set[tuple[str, tuple[str, ...]]] = set()
        self.has_class = False
        self.value_spells_jit = False
        """``.jit``-like attributes or imports outside the methods of classes."""
        self.policy_host_literals = 0
        """Host memory kinds spelled as string arguments of offload policy calls
        (``offload_dst="pinned_host"``): where a policy's residuals go, never a value the
        check follows (``jax.checkpoint`` leaves the offload machinery to ``run``)."""
        self.policy_callees: set[str] = set()
        """The names those calls' callees are read through (``cp`` of
        ``cp.offload_dot_with_no_batch_dims``), which must be JAX's for them to discount."""

    def walk(self, stack: list[tuple[ast.AST, bool, bool, bool]]) -> None:
        """Walks the nodes of ``stack``: (node, inside a def/class/lambda, inside a class,
        inside a method of a class); the last first, each with all below it."""
        while stack:
            node, inner, in_class, in_method = stack.pop()
            kind = type(node)
            if kind is ast.Name:
                if type(node.ctx) is ast.Load:  # type: ignore[attr-defined]
                    self._read(node.id, (), in_method)  # type: ignore[attr-defined]
                continue
            if kind is ast.Attribute:
                chain = []
                base: ast.AST = node
                while type(base) is ast.Attribute:
                    chain.append(base.attr)
                    (self.attributes_read if type(base.ctx) is ast.Load else self.attributes_stored).add(base.attr)
                    base = base.value
                if not in_method and any(attribute in JIT_ATTRIBUTES for attribute in chain):
                    self.value_spells_jit = True
                if type(base) is ast.Name:
                    self._read(base.id, tuple(reversed(chain)), in_method)
                else:
                    stack.append((base, inner, in_class, in_method))
                continue
            if kind is ast.Import or kind is ast.ImportFrom:
                (self.nested_imports if inner else self.imports).append(node)  # type: ignore[arg-type]
                if not in_method and any(alias.name.rsplit(".", 1)[-1] in JIT_ATTRIBUTES for alias in node.names):  # type: ignore[attr-defined]
                    self.value_spells_jit = True
                continue
            if kind is ast.Call:
                self._policy_call(node)  # type: ignore[arg-type]
            elif kind is ast.ClassDef:
                self.has_class = in_class = True
            elif in_class and (kind is ast.FunctionDef or kind is ast.AsyncFunctionDef):
                in_method = True
            inner = inner or kind in _SCOPES
            for field in kind._fields:  # ``ast.iter_child_nodes``, without its leaves
                if field in _ANNOTATIONS:
                    continue  # a type: never a value the check follows (``x: TensorSpec``)
                value = getattr(node, field, None)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, ast.AST) and type(item) not in _LEAVES:
                            stack.append((item, inner, in_class, in_method))
                elif isinstance(value, ast.AST) and type(value) not in _LEAVES:
                    stack.append((value, inner, in_class, in_method))

    def _policy_call(self, call: ast.Call) -> None:
        """Counts the host memory kinds an offload policy call is given as strings."""
        callee: ast.AST = call.func
        called = callee.attr if type(callee) is ast.Attribute else getattr(callee, "id", None)
        while type(callee) is ast.Attribute:
            callee = callee.value
        if type(callee) is not ast.Name or called not in POLICY_NAMES:
            return
        literals = sum(
            host_kinds_in(argument.value)
            for argument in (*call.args, *(keyword.value for keyword in call.keywords))
            if type(argument) is ast.Constant and type(argument.value) is str
        )
        if literals:
            self.policy_host_literals += literals
            self.policy_callees.add(callee.id)

    def _read(self, name: str, chain: tuple[str, ...], in_method: bool) -> None:
        read = (name, chain)
        if read not in self._seen:  # each read once: a module's groups are kept for the run
            self._seen.add(read)
            self.reads.append(read)
        if not in_method and read not in self._seen_in_value:
            self._seen_in_value.add(read)
            self.value_reads.append(read)

    def take(self, other: _Reads) -> None:
        """What ``other`` found, as if this walk had walked its statements now."""
        for read in other.reads:
            if read not in self._seen:
                self._seen.add(read)
                self.reads.append(read)
        for read in other.value_reads:
            if read not in self._seen_in_value:
                self._seen_in_value.add(read)
                self.value_reads.append(read)
        self.imports.extend(other.imports)
        self.nested_imports.extend(other.nested_imports)
        self.attributes_read |= other.attributes_read
        self.attributes_stored |= other.attributes_stored
        self.has_class = self.has_class or other.has_class
        self.value_spells_jit = self.value_spells_jit or other.value_spells_jit
        self.policy_host_literals += other.policy_host_literals
        self.policy_callees |= other.policy_callees


class Group(_Reads):
    """What the ``ast`` of one top-level statement group tells."""

    def __init__(self, statements: Sequence[ast.stmt], text: str) -> None:
        super().__init__()
        for statement in reversed(statements):  # in the order one walk of them all pops them
            if type(statement) is ast.ClassDef:
                self._walk_class(statement)
            else:
                self.walk([(statement, False, False, False)])
        del self._seen, self._seen_in_value
        only_imports = all(isinstance(statement, (ast.Import, ast.ImportFrom)) for statement in statements)
        self.mentions_jit = JIT_MARKER in text and not only_imports
        """``jit`` anywhere in the text: whose tree the checked file keeps (:func:`keep_jit_groups_only`)."""
        self.spells_jit = self.mentions_jit and (
            not JIT_ATTRIBUTES.isdisjoint(self.attributes_read | self.attributes_stored)
            or bool(_JIT_STRING.search(text))
        )
        """An attribute ``jit``/``pjit`` read anywhere (``jax.jit``, ``functools.partial(jax.jit)``),
        or the string (``getattr``): what can start a jit the statement's own reads do not lead to
        (an import of ``jax.jit`` is resolved as a read; ``pjit.jit_p`` or ``jitted`` is no jit)."""
        self.spells_host = COMPUTE_ON_WORD in text or host_kinds_in(text) > self.policy_host_literals
        """A host memory kind as a word (:func:`.prefilter.host_kinds_in`) or ``compute_on``
        anywhere in the text (in an import too, in a comment, and in methods: a class's value is
        taken to be all of it), besides the
        destinations of offload policy calls (:attr:`policy_host_literals`), which start no
        value: a module that only configures remat offloading holds no host value for a jit
        site to meet. Those calls' callees must still be JAX's (``.candidates`` resolves them)."""
        self.class_shape = _class_shape(statements)
        """What the header of a group that is one class statement says."""
        self.runs_eagerly = any(_runs_eagerly(statement) for statement in statements)
        """Code of the group runs outside any jit (:mod:`.eager`): a statement other than an
        import, a ``def`` or a class, a test function, or a class with test methods."""

    def _walk_class(self, cls: ast.ClassDef) -> None:
        """A top-level class, as :meth:`walk` walks it, each member of its body taken from
        :data:`_MEMBER_READS` where it was walked before."""
        self.has_class = True
        below: list[tuple[str, ast.AST]] = []
        for field in ast.ClassDef._fields:
            value = getattr(cls, field, None)
            for item in value if type(value) is list else [value]:
                if isinstance(item, ast.AST) and type(item) not in _LEAVES:
                    below.append((field, item))
        for field, item in reversed(below):
            if field != "body":
                self.walk([(item, True, True, False)])
                continue
            member = _MEMBER_READS.get(item)
            if member is None:
                member = _MEMBER_READS[item] = _Reads()
                member.walk([(item, True, True, False)])
                del member._seen, member._seen_in_value
            self.take(member)


def is_test(statement: ast.stmt) -> bool:
    """A test function or method, which a test runner calls outside any jit (as :mod:`.eager`
    runs them: not a coroutine)."""
    return type(statement) is ast.FunctionDef and statement.name.startswith("test")


def _runs_eagerly(statement: ast.stmt) -> bool:
    kind = type(statement)
    if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
        return is_test(statement)
    if kind is ast.ClassDef:
        return any(is_test(member) for member in statement.body)  # type: ignore[attr-defined]
    return kind is not ast.Import and kind is not ast.ImportFrom


_MEMBER_READS: weakref.WeakKeyDictionary[ast.AST, _Reads] = weakref.WeakKeyDictionary()
"""What each statement of a top-level class's body reads, by its node: a document's outline
keeps the members an edit left alone (:mod:`.class_members`)."""


@dataclass(frozen=True)
class ClassShape:
    """What the header of a group's one class statement says: its name, whether it has
    decorators or keywords (``metaclass=``), each base as a dotted name (None: any other
    expression), and the line (the file's number) and column where its body starts, where
    :meth:`.scopes.ForeignScope.class_header` cuts it."""

    name: str
    decorated: bool
    keywords: bool
    bases: tuple[tuple[str, ...] | None, ...]
    body: tuple[int, int]


def _class_shape(statements: Sequence[ast.stmt]) -> ClassShape | None:
    if len(statements) != 1 or type(statements[0]) is not ast.ClassDef:
        return None
    cls = statements[0]
    bases: list[tuple[str, ...] | None] = []
    for base in cls.bases:
        chain: list[str] = []
        while type(base) is ast.Attribute:
            chain.append(base.attr)
            base = base.value
        bases.append((base.id, *reversed(chain)) if type(base) is ast.Name else None)
    first = cls.body[0]
    body = first_line(first), first.col_offset
    return ClassShape(cls.name, bool(cls.decorator_list), bool(cls.keywords), tuple(bases), body)
