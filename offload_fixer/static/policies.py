"""Offload policies that offload nothing: ``offload_dst="unpinned_host"`` (the OFL1204 trap),
``offload_dst="device"`` (OFL1211: the residuals are in device memory already), and names that
no ``checkpoint_name`` of the file tags but one tag nearly spells (OFL1211).

A remat policy built with ``save_and_offload_only_these_names(..., offload_dst="unpinned_host")``,
``offload_dot_with_no_batch_dims(..., "unpinned_host")`` or ``Offloadable(dst="unpinned_host")``
leaves no move in the lowered module (JAX treats the destination as device memory), so only
the source shows it: the residuals stay on device and the memory saving silently vanishes.
The destination may be held in a name or a class attribute of the file (``offload_dst=DST``,
``offload_dst=Config.offload_dst``, a dataclass field's default): the literal is reported
where it is written, when it is the one value the file ever binds there.

A ``save_and_offload_only_these_names`` policy that offloads a name nothing tags leaves no
move either. The names may be tagged in another module, so the check reports a name only
where the file tags others, every tag a literal, and one of them is close to the name (a
misspelling: "hiden" for "hidden"), at the name's literal, with the tag it was meant to be.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import libcst as cst

from offload_fixer import codes
from offload_fixer.model import DEVICE, UNPINNED_HOST, Diagnostic, FixOption, Origin, Span
from offload_fixer.rules import get_rule
from offload_fixer.rules.ofl1204 import PIN_HOST_MEMORY, UNPINNED_POLICY
from offload_fixer.rules.ofl1211 import (
    PIN_DESTINATION,
    POLICY_DESTINATION_NOT_HOST,
    POLICY_NAMES_UNTAGGED,
    RENAME_TITLE,
    RENAME_WHY,
    WHY_POLICY,
)
from offload_fixer.source.checkpoint_names import (
    NAME_POLICIES,
    OFFLOADED_NAMES_KEYWORD,
    TAGGING,
    close_tags,
    offloaded_names,
    tag_of,
)
from offload_fixer.source.offload_policies import (
    NO_OFFLOAD_DESTINATIONS,
    POLICY_DESTINATION_KEYWORDS,
    POLICY_DESTINATION_POSITIONS,
    policy_destinations,
)

from .prefilter import DEVICE_DESTINATION
from .scopes import NotCut
from .source import ParsedSource

if TYPE_CHECKING:
    from .scopes import ForeignScope


DESTINATION_SPELLING = re.compile(
    "|".join(map(re.escape, (*POLICY_DESTINATION_KEYWORDS, *POLICY_DESTINATION_POSITIONS)))
)
"""Text without which a statement names no policy destination (:func:`policy_destinations`)."""
_DEVICE_DESTINATION = re.compile(DEVICE_DESTINATION)


def unpinned_policies(
    parsed: ParsedSource, text: str, path: str, target: str, source_sha256: str | None
) -> list[Diagnostic]:
    if not names_destination(text):  # the common case costs a few substring searches
        return []
    finder = _Finder()
    parsed.module.visit(finder)
    return _diagnostics(finder, parsed, path, target, source_sha256)


def unpinned_policies_by_statement(
    scope: ForeignScope, text: str, path: str, target: str, source_sha256: str | None
) -> list[Diagnostic]:
    """The same findings for a module read statement by statement (the checked file's
    :class:`~.scopes.ForeignScope`): only the statements that can name a destination, and
    those that spell a name a destination reads (none can bind it without), are parsed.
    Raises :class:`~.scopes.NotCut` when one of them does not parse alone."""
    if not names_destination(text):
        return []
    facts = scope.facts
    pieces = [facts.piece(index) for index in range(len(facts.outline.groups))]
    named = {index for index, piece in enumerate(pieces) if DESTINATION_SPELLING.search(piece)}
    finder = _Finder()
    for index in sorted(named):
        visit_chunk(_chunk(scope, index), finder)
    words = {name for value in finder.destinations if (name := _read_name(value)) is not None}
    if words:  # the bindings of the names destinations read: in file order, with the destinations
        spelled = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(words))) + r")\b")
        finder = _Finder()
        for index, piece in enumerate(pieces):
            if index in named or spelled.search(piece):
                visit_chunk(_chunk(scope, index), finder)
    return _diagnostics(finder, scope.source(), path, target, source_sha256)


def names_destination(text: str) -> bool:
    """Whether ``text`` can name a destination through which a policy offloads nothing."""
    return UNPINNED_HOST in text or _DEVICE_DESTINATION.search(text) is not None


def visit_chunk(chunk: Any, finder: _Finder) -> None:
    """``finder`` over the statement of ``chunk``, what it finds kept with the chunk (a
    document's next version visits only the statements an edit changed); a class parsed in
    pieces (:mod:`.class_pieces`) piece by piece, what each finds kept with the piece."""
    found = chunk.memo.get(_FOUND)
    if found is None:
        alone = _Finder()
        statement = chunk.statements[0]
        if not chunk.parts or not isinstance(statement, cst.ClassDef):
            statement.visit(alone)
        else:
            alone.visit_ClassDef(statement)
            for node in (*statement.decorators, *statement.bases, *statement.keywords):
                node.visit(alone)
            for _, part in chunk.parts:
                key = (_FOUND, statement.name.value)
                in_part = part.memo.get(key)
                if in_part is None:
                    inner = _Finder()
                    inner.classes = [statement.name.value]
                    for member in part.statements:
                        member.visit(inner)
                    in_part = part.memo[key] = (inner.destinations, inner.bindings)
                alone.take(*in_part)
            alone.leave_ClassDef(statement)
        found = chunk.memo[_FOUND] = (alone.destinations, alone.bindings)
    finder.take(*found)


_FOUND = "policy destinations and bindings"


def _chunk(scope: ForeignScope, index: int) -> Any:
    chunk = scope.chunk(index)
    if chunk is None:
        raise NotCut(str(index))
    return chunk


def _read_name(value: cst.BaseExpression) -> str | None:
    """The name a destination reads its value through (``DST``; ``dst`` of ``Config.dst``)."""
    if isinstance(value, cst.Name):
        return value.value
    if isinstance(value, cst.Attribute):
        return value.attr.value
    return None


class _Finder(cst.CSTVisitor):
    """The policy destinations of the statements visited, and every binding of a name there."""

    def __init__(self) -> None:
        super().__init__()
        self.destinations: list[cst.BaseExpression] = []
        self.bindings: dict[str, list[cst.BaseExpression | None]] = {}
        self.classes: list[str] = []

    def take(
        self, destinations: list[cst.BaseExpression], bindings: dict[str, list[cst.BaseExpression | None]]
    ) -> None:
        """What another finder found, as if this one had visited its statements now."""
        self.destinations.extend(destinations)
        for name, values in bindings.items():
            self.bindings.setdefault(name, []).extend(values)

    def visit_Call(self, node: cst.Call) -> None:
        self.destinations.extend(policy_destinations(node))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.classes.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node.target, None)

    def visit_Param(self, node: cst.Param) -> None:
        self._bind(node.name, None)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        """Every binding of a name, keyed ``name`` and, in a class body, ``Class.name``."""
        bindings = self.bindings
        if isinstance(target, cst.Name):
            bindings.setdefault(target.value, []).append(value)
            if self.classes:
                bindings.setdefault(f"{self.classes[-1]}.{target.value}", []).append(value)
        elif isinstance(target, cst.Attribute):
            bindings.setdefault(f".{target.attr.value}", []).append(None)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value, None)


def _diagnostics(
    finder: _Finder, parsed: ParsedSource, path: str, target: str, source_sha256: str | None
) -> list[Diagnostic]:
    bindings = finder.bindings
    found = list(
        dict.fromkeys(literal for value in finder.destinations if (literal := _literal(value, bindings)) is not None)
    )
    rule = get_rule(codes.UNPINNED_HOST_MEMORY)
    out = []
    for literal in found:
        where = parsed.code_range(literal)
        span = Span(path, where.start.line, where.start.column + 1, where.end.line, where.end.column + 1)
        if literal.evaluated_value == DEVICE:
            out.append(_to_device(span, target, source_sha256))
            continue
        out.append(
            Diagnostic(
                code=rule.code,
                severity="warning",
                target=target,
                message=UNPINNED_POLICY.format(),
                explanation=(
                    "An offload policy (or Offloadable) whose destination is 'unpinned_host' lowers to no "
                    "move at all, so the residuals it should offload stay in device memory and the "
                    "saving it was written for silently disappears. Use 'pinned_host'."
                ),
                span=span,
                fixes=(rule.fix_option("host", PIN_HOST_MEMORY.format()),),
                source="static",
                source_sha256=source_sha256,
            )
        )
    return out


def _to_device(span: Span, target: str, source_sha256: str | None) -> Diagnostic:
    """OFL1211 at a policy's ``"device"`` destination, as ``run`` reports it from the traced program."""
    rule = get_rule(codes.OFFLOAD_DOES_NOTHING)
    return Diagnostic(
        code=rule.code,
        severity="warning",
        target=target,
        message=POLICY_DESTINATION_NOT_HOST.format(destination=DEVICE),
        explanation=WHY_POLICY,
        origin=Origin("offload_policy", DEVICE, span, key=f"policy:{span}"),
        span=span,
        fixes=(PIN_DESTINATION,),
        source="static",
        source_sha256=source_sha256,
    )


def _literal(value: cst.BaseExpression, bindings: dict[str, list]) -> cst.SimpleString | None:
    """The ``"unpinned_host"`` or ``"device"`` literal a destination is, or is bound to once in the file: a name
    (``DST``) or an attribute of a class of the file (``Config.dst``, ``self.config.dst`` where
    one class defines ``dst`` and nothing assigns an attribute of that name)."""
    if isinstance(value, cst.Name):
        values = bindings.get(value.value, [])
    elif isinstance(value, cst.Attribute):
        owner = value.value.value if isinstance(value.value, cst.Name) else None
        name = value.attr.value
        values = bindings.get(f"{owner}.{name}") or []
        if not values and not bindings.get(f".{name}"):
            defined = [key for key in bindings if key.endswith(f".{name}") and not key.startswith(".")]
            values = bindings[defined[0]] if len(defined) == 1 else []
    else:
        values = [value]
    if len(values) != 1:
        return None
    (literal,) = values
    return (
        literal
        if isinstance(literal, cst.SimpleString) and literal.evaluated_value in NO_OFFLOAD_DESTINATIONS
        else None
    )


NAMES_SPELLING = re.compile("|".join(map(re.escape, (OFFLOADED_NAMES_KEYWORD, *NAME_POLICIES, TAGGING))))
"""Text without which a statement names no offloaded name and tags none."""


def untagged_names(
    parsed: ParsedSource, text: str, path: str, target: str, source_sha256: str | None
) -> list[Diagnostic]:
    """Names an offload policy of the file offloads that a ``checkpoint_name`` of the file
    nearly tags (OFL1211), at each name's literal."""
    if not _spells_names(text):
        return []
    finder = _NamesFinder()
    parsed.module.visit(finder)
    return _untagged(finder, parsed, path, target, source_sha256)


def untagged_names_by_statement(
    scope: ForeignScope, text: str, path: str, target: str, source_sha256: str | None
) -> list[Diagnostic]:
    """:func:`untagged_names` over the statements that spell a policy's names or a tag, each
    parsed alone; raises :class:`~.scopes.NotCut` when one does not."""
    if not _spells_names(text):
        return []
    facts = scope.facts
    finder = _NamesFinder()
    for index in range(len(facts.outline.groups)):
        if NAMES_SPELLING.search(facts.piece(index)):
            chunk = _chunk(scope, index)
            chunk.statements[0].visit(finder)
            for _, part in chunk.parts or ():
                for member in part.statements:
                    member.visit(finder)
    return _untagged(finder, scope.source(), path, target, source_sha256)


def _spells_names(text: str) -> bool:
    return TAGGING in text and (OFFLOADED_NAMES_KEYWORD in text or any(policy in text for policy in NAME_POLICIES))


class _NamesFinder(cst.CSTVisitor):
    """The name literals offload policies offload, and the names ``checkpoint_name`` tags."""

    def __init__(self) -> None:
        super().__init__()
        self.offloaded: list[cst.SimpleString] = []
        self.tags: list[cst.BaseExpression] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.offloaded.extend(offloaded_names(node) or ())
        tag = tag_of(node)
        if tag is not None:
            self.tags.append(tag)


def _untagged(
    finder: _NamesFinder, parsed: ParsedSource, path: str, target: str, source_sha256: str | None
) -> list[Diagnostic]:
    values = [tag.evaluated_value for tag in finder.tags if isinstance(tag, cst.SimpleString)]
    tags = [tag for tag in values if isinstance(tag, str)]
    if not tags or len(tags) != len(finder.tags):
        return []  # no tag here, or one the source computes: which names are tagged, it cannot tell
    rule = get_rule(codes.OFFLOAD_DOES_NOTHING)
    out = []
    for literal in dict.fromkeys(finder.offloaded):
        name = literal.evaluated_value
        close = close_tags(name, tags) if isinstance(name, str) and name not in tags else []
        if not close:
            continue
        where = parsed.code_range(literal)
        span = Span(path, where.start.line, where.start.column + 1, where.end.line, where.end.column + 1)
        out.append(
            Diagnostic(
                code=rule.code,
                severity=rule.severity(target),
                target=target,
                message=POLICY_NAMES_UNTAGGED.format(names=repr(name), hint=f" (did you mean {close[0]!r}?)"),
                explanation=WHY_POLICY,
                span=span,
                fixes=(
                    FixOption("host", RENAME_TITLE.format(tag=close[0]), RENAME_WHY.format(name=name, tag=close[0])),
                ),
                source="static",
                source_sha256=source_sha256,
            )
        )
    return out
