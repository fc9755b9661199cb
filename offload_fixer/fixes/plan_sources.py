"""The planner's view of the source files: each read once and cut into statements once, and
the codemods' dry runs against excerpts of them, kept per (codemod, target).

Also what the planner asks of a function's source: the parameter a host-argument origin
names, and where the returns give a name back.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst.codemod import CodemodContext

from offload_fixer.codemods.fix_command import FixCommand
from offload_fixer.codemods.pytree_source import literal_paths, locate, returned_values
from offload_fixer.codemods.source_facts import FunctionInfo, SourceFacts
from offload_fixer.codemods.state_flow import StateFlow
from offload_fixer.codemods.targets import Edit, FunctionTarget, HostValueTarget
from offload_fixer.codes import HOST_COMPUTE_CODES
from offload_fixer.findings import split_argument
from offload_fixer.fixes.errors import FixError
from offload_fixer.fixes.excerpt import FileOutline
from offload_fixer.fixes.source_io import decode_source, read_source, sha256_of
from offload_fixer.model import Diagnostic, Origin, PathKey, Role, Span
from offload_fixer.source.error_tests import error_asserted_at
from offload_fixer.source.metadata import node_positions

Job = tuple[type[FixCommand], FunctionTarget]
"""One edit to make: the codemod (a :class:`FixCommand` class) and its target."""


def same_file(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is None
    return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


def in_file(span: Span | None, path: str | None) -> Span | None:
    return span if span is not None and same_file(span.path, path) else None


@dataclass
class DryRun:
    edits: list[Edit]
    problems: list[str]
    satisfied: list[str]


@dataclass
class Source:
    path: str
    sha256: str | None = None
    outline: FileOutline | None = None
    error: str | None = None
    _runs: dict[Job, DryRun] = field(default_factory=dict, repr=False)
    _facts: dict[int, tuple[Any, SourceFacts]] = field(default_factory=dict, repr=False)
    """By the excerpt's id: the excerpt (kept, so its id stays its own) and its facts."""

    def prefetch(self, codemod: type[FixCommand], targets: Sequence[FunctionTarget]) -> None:
        """Dry-run several targets in one pass over the statements they need."""
        assert self.outline is not None
        excerpt = self.outline.excerpt_for(targets)
        run = codemod(
            CodemodContext(filename=self.path),
            targets=targets,
            line_map=excerpt.file_line,
            reference_count=self.outline.reference_count,
            facts=self._excerpt_facts(excerpt),
        )
        run.transform_module(excerpt.module)
        for target, outcome in zip(targets, run.outcomes):
            if not outcome.deferred:
                self._runs[(codemod, target)] = DryRun(outcome.edits, outcome.problems, outcome.satisfied)

    def dry_run(self, codemod: type[FixCommand], target: FunctionTarget) -> DryRun:
        if (codemod, target) not in self._runs:
            self.prefetch(codemod, [target])
        return self._runs[(codemod, target)]

    def asserted_error(self, group: Sequence[Diagnostic]) -> str | None:
        """Why no edit is written where every finding of ``group`` is in code a test of this
        file expects to fail (``with pytest.raises(...)``): a suppression is the answer there."""
        if self.outline is None:
            return None
        spans = [in_file(d.span, self.path) for d in group]
        blocks = {error_asserted_at(self.outline.text, span.line) if span is not None else None for span in spans}
        if len(blocks) != 1 or None in blocks:
            return None
        codes = ", ".join(sorted({d.code for d in group}))
        return (
            f"inside {blocks.pop()}, a test that expects this error: suppress it on its line "
            f"(`# offload-fixer: ignore[{codes}]`, or `check --add-noqa`) instead of fixing it"
        )

    def facts(self, target: FunctionTarget) -> SourceFacts:
        """What the codemods know of the statements ``target`` needs, in file lines: collected
        once per excerpt (positions cost about three parses; a plan asks several times)."""
        assert self.outline is not None
        return self._excerpt_facts(self.outline.excerpt_for([target]))

    def _excerpt_facts(self, excerpt: Any) -> SourceFacts:
        assert self.outline is not None
        found = self._facts.get(id(excerpt))
        if found is None or found[0] is not excerpt:
            facts = SourceFacts.collect(
                excerpt.module, node_positions(excerpt.module), excerpt.file_line, self.outline.reference_count
            )
            found = self._facts[id(excerpt)] = (excerpt, facts)
        return found[1]

    def function(self, target: FunctionTarget) -> tuple[SourceFacts, FunctionInfo] | None:
        facts = self.facts(target)
        function = facts.find_function(target.function_name, target.function_line, target.inner_line)
        return (facts, function) if function is not None else None

    def host_parameter(self, target: FunctionTarget, origin: Origin) -> tuple[str, str] | None:
        """(parameter, pytree path inside it) a host-argument origin names: by its span inside
        the signature, else by its label (``NAME['key']...``), else by its flat index when every
        parameter is a single array."""
        found = self.function(target)
        if found is None:
            return None
        facts, function = found
        params = _parameters(function)
        names = [name for name, _ in params]
        span = origin.span
        if span is not None and same_file(span.path, self.path):
            for name, node in params:
                where = facts.positions[node]
                if where.start.line <= span.line <= where.end.line and (
                    where.start.line != span.line or where.start.column < span.col <= where.end.column + 1
                ):
                    return name, ""
        if origin.argument:
            name, path = split_argument(origin.argument)
            if name in names:
                return name, path
        index = origin.argument_index
        if index is not None and len(names) == len(function.positional_params) > index:
            return function.positional_params[index], ""
        return None

    def positional_index(self, target: FunctionTarget, name: str) -> int | None:
        """Where ``name`` sits among the function's positional parameters."""
        found = self.function(target)
        if found is None or name not in found[1].positional_params or found[1].class_name is not None:
            return None
        return found[1].positional_params.index(name)

    def returns_tuples(self, target: FunctionTarget) -> bool:
        """Every return of the function gives a tuple literal: a jit in another file may spell
        its ``out_shardings`` as a tuple, which it must match."""
        found = self.function(target)
        values = [value for _, value in returned_values(found[1], ())] if found is not None else []
        return bool(values) and all(isinstance(value, cst.Tuple) for value in values)

    def returned_paths(self, target: FunctionTarget) -> list[tuple[PathKey, ...]]:
        """Pytree paths every return of the function spells out (literals, through local names),
        for a source check, which has no output tree."""
        found = self.function(target)
        if found is None:
            return []
        facts, function = found
        per_return = [set(literal_paths(facts, function.scope, value)) for _, value in returned_values(function, ())]
        return sorted(set.intersection(*per_return), key=repr) if per_return else []

    def returned_state(
        self,
        target: HostValueTarget,
        outputs: Sequence[tuple[PathKey, ...]],
        leaves: Sequence[tuple[PathKey, ...]],
        mirrors: Sequence[tuple[PathKey, ...]],
    ) -> dict[tuple[PathKey, ...], str]:
        """For a source check: whether each output gives back the streamed parameter's host
        state (``state``), a new value (``new``), an update of a host leaf that may broadcast
        (``derived``), or the source cannot tell (``unknown``), by every return. An elementwise
        update with operands of unknown shape is the state where the output sits at a
        ``mirrors`` prefix plus the leaf's own path (the state's keys)."""
        found = self.function(target)
        if found is None or not target.parameter:
            return dict.fromkeys(outputs, "unknown")
        facts, function = found
        flows = StateFlow(facts, target.parameter, leaves)
        verdicts: dict[tuple[PathKey, ...], str] = {}
        for keys in outputs:
            seen = set()
            for _, value in returned_values(function, ()):
                located = locate(facts, function.scope, value, keys)
                flow = flows.at(function.scope, located.node)
                leaf = (*flow.path, *located.rest)
                if flow.kind in ("new", "other") and not located.rest:  # not made by updating the state
                    seen.add("new")
                elif leaf in leaves and (
                    flow.kind == "state" or (flow.kind == "derived" and any(keys == (*m, *leaf) for m in mirrors))
                ):
                    seen.add("state")
                elif leaf and leaf in leaves and flow.kind == "derived" and keys[len(keys) - len(leaf) :] == leaf:
                    seen.add("derived")  # at the leaf's own key (``.velocity``), where the source hides the rest
                else:
                    seen.add("unknown")
            verdicts[keys] = seen.pop() if len(seen) == 1 else "derived" if "derived" in seen else "unknown"
        return verdicts

    def returned_at(self, target: FunctionTarget, name: str) -> list[tuple[PathKey, ...]]:
        """Pytree paths at which the function's returns give back ``name`` (a parameter,
        perhaps assigned again: ``params = update(params); return params, loss``)."""
        found = self.function(target)
        if found is None:
            return []
        facts, function = found
        paths: list[tuple[PathKey, ...]] = []
        for _, value in returned_values(function, ()):
            for keys in _element_paths(value):
                located = locate(facts, function.scope, value, keys)
                node = located.node
                if not located.rest and isinstance(node, cst.Name) and node.value == name:
                    paths.append(keys)
        return list(dict.fromkeys(paths))


def _element_paths(value: cst.BaseExpression, depth: int = 2) -> list[tuple[PathKey, ...]]:
    """The path of ``value`` and of its literal elements, two levels down."""
    paths: list[tuple[PathKey, ...]] = [()]
    if depth and isinstance(value, (cst.Tuple, cst.List)):
        for index, element in enumerate(value.elements):
            paths += [(("index", index), *rest) for rest in _element_paths(element.value, depth - 1)]
    return paths


def _parameters(function: FunctionInfo) -> list[tuple[str, cst.Param]]:
    params = function.node.params
    return [(p.name.value, p) for p in [*params.posonly_params, *params.params, *params.kwonly_params]]


class Sources:
    def __init__(self, texts: Mapping[str, bytes]) -> None:
        self._texts = {os.path.abspath(path): data for path, data in texts.items()}
        self._cache: dict[str, Source] = {}

    def get(self, path: str) -> Source:
        if path not in self._cache:
            self._cache[path] = self._load(path)
        return self._cache[path]

    def _load(self, path: str) -> Source:
        try:
            data = self._texts.get(os.path.abspath(path))
            if data is None:
                data = read_source(path)
            return Source(path, sha256_of(data), FileOutline.of(path, decode_source(path, data)))
        except FixError as exc:
            return Source(path, error=str(exc))


def left_on_host(diagnostic: Diagnostic, edits: Sequence[Edit], path: str | None) -> bool:
    """A host-compute finding with a computation on a line an edit leaves in host memory
    (:attr:`Edit.host_compute_kept`: a stack moved slice by slice whose update stays host
    compute): the edit does not remove it, so the plan does not claim it."""
    kept = {line for edit in edits for line in edit.host_compute_kept}
    if not kept or diagnostic.code not in HOST_COMPUTE_CODES:
        return False
    spans = [diagnostic.span] + [step.span for step in diagnostic.trace if step.role == Role.HOST_COMPUTE]
    return any(span is not None and span.line in kept and same_file(span.path, path) for span in spans)
