"""What both fix commands share: command-line flags, finding the function, the jit
options, derived shardings and recording what was (or could not be) done.

Over 500 lines on purpose: the base class of every codemod; the sharding derivations read and
record into the command's own state (facts, spelling, edits and problems), so they stay with it."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, cast

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext, SkipFile
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import CodeRange, PositionProvider

from offload_fixer import jax_compat
from offload_fixer.code_style import CodeStyle
from offload_fixer.codemods import sharding_exprs as sx
from offload_fixer.codemods.pytree_source import child_at, no_part_at, returned_values
from offload_fixer.codemods.source_facts import (
    DEVICE_PUT,
    SHARDING_CONSTRUCTORS,
    FunctionInfo,
    JitSite,
    Scope,
    SourceFacts,
)
from offload_fixer.codemods.targets import Edit, FunctionTarget, HostValueTarget, Placement
from offload_fixer.model import (
    WHOLE_RESULT,
    EditSafety,
    PathKey,
    format_output_path,
    parse_output_path,
    shown_output_path,
)
from offload_fixer.source.bindings import last_name
from offload_fixer.source.metadata import MetadataWrapper

Rewrite = Callable[[cst.CSTNode], cst.CSTNode]
_POSITIONAL_OPTIONS = {"in_shardings": 1, "out_shardings": 2}


@dataclass
class Outcome:
    """What a command did for one target."""

    edits: list[Edit] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    satisfied: list[str] = field(default_factory=list)
    """Outputs that needed nothing: already fixed (what makes a second run a no-op)."""
    deferred: bool = False
    """Another target of this run edits the same node; run this one again on the result."""


class FixCommand(CodemodCommand):
    """Base of the fixes. Build it with one target of its ``TARGET`` type (``target=``), several
    (``targets=``: one pass over the file for all of them, an outcome each) or, from
    ``python -m libcst.tool codemod``, with the flags of :meth:`add_args`."""

    METADATA_DEPENDENCIES = (PositionProvider,)
    STRATEGY: ClassVar[str] = "device"
    """The fix strategy its edits carry out (``device`` or ``host``)."""
    FIXES: ClassVar[Mapping[Placement, frozenset[str]]] = {}
    """The placements it makes, each with the diagnostic codes an edit there fixes: the
    planner picks a codemod by these, never by its name."""
    NEEDS_FUNCTION = True
    """False: a target may name only a line (a module-level policy's destination, say)."""
    TARGET: ClassVar[type[FunctionTarget]] = FunctionTarget
    """Its own target: the fields it reads, which the planner fills in for it."""
    target: FunctionTarget

    def __init__(
        self,
        context: CodemodContext,
        target: FunctionTarget | None = None,
        targets: Sequence[FunctionTarget] = (),
        *,
        line_map: Callable[[int], int] | None = None,
        reference_count: Callable[[str], int] | None = None,
        facts: SourceFacts | None = None,
        style: CodeStyle | None = None,
        **flags: Any,
    ) -> None:
        """``line_map``/``reference_count``: the module is an excerpt of a file (see
        ``SourceFacts.collect``); lines in targets, edits and messages are the file's.
        ``facts``: collected already (with the same ``line_map`` and ``reference_count``) from
        the module this command will transform; a dry run of several commands over one module
        then resolves positions and walks it once, not once per command. ``style``: the
        project's, whose quotes new string literals take (else most of the module's literals')."""
        super().__init__(context)
        self.line_map = line_map
        self.reference_count = reference_count
        self.known_facts = facts
        self.style = style
        self.standalone = target is None and not targets
        """Built from ``python -m libcst.tool codemod`` flags: a target that does not fit the
        file is reported through libcst (the file is skipped, with the reason), not ignored."""
        self.targets = tuple(targets) or (target if target is not None else _target_from_flags(self.TARGET, flags),)
        self.outcomes = [Outcome() for _ in self.targets]
        self.target, self.outcome = self.targets[0], self.outcomes[0]
        self.rewrites: dict[cst.CSTNode, Rewrite] = {}
        self.owners: dict[cst.CSTNode, Outcome] = {}
        self._evidence: _MultiDeviceEvidence | None = None

    @property
    def edits(self) -> list[Edit]:
        return [edit for outcome in self.outcomes for edit in outcome.edits]

    @property
    def problems(self) -> list[str]:
        return [problem for outcome in self.outcomes for problem in outcome.problems]

    @property
    def satisfied(self) -> list[str]:
        return [note for outcome in self.outcomes for note in outcome.satisfied]

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument("--function-name", help="name of the jitted function")
        arg_parser.add_argument("--function-line", type=_line, help="a line of its def or decorators")
        arg_parser.add_argument("--inner-line", type=_line, help="a line inside the function")
        arg_parser.add_argument(
            "--output-path",
            action="append",
            default=None,
            type=_shown_output_path,
            help="pytree path of an offending output (\"[0]['mu']\"; '' or 'the whole result': all of it), "
            "as offload-fixer's reports spell it (\"[0]['mu'] (flat output 3)\" is [0]['mu']); repeatable",
        )
        arg_parser.add_argument(
            "--output-kind",
            action="append",
            default=None,
            type=_output_kind,
            help="PATH=KIND for every flat output (\"[0]['w']=device\"), as the analysis saw "
            "them: out_shardings is shaped like them where the returns do not show it",
        )
        arg_parser.add_argument(
            "--return-line",
            type=_line,
            action="append",
            default=None,
            help="edit only the return spanning this line; repeatable",
        )
        arg_parser.add_argument("--parameter", help="the host argument, for --placement entry")
        arg_parser.add_argument("--parameter-index", type=int)
        arg_parser.add_argument(
            "--parameter-path", default="", type=_pytree_path, help="pytree path of the host leaf inside the parameter"
        )
        arg_parser.add_argument(
            "--parameter-leaf",
            action="append",
            default=None,
            type=_pytree_path,
            help="a host leaf (or sub-tree) of the parameter to move, \"['mu']\"; repeatable (default: all of it)",
        )
        arg_parser.add_argument("--origin-line", type=_line, help="line of the move to host")
        arg_parser.add_argument("--origin-col", type=_column, help="its column, where the line holds several")
        arg_parser.add_argument(
            "--compute-line",
            type=_line,
            action="append",
            default=None,
            help="a line computing on the offloaded value (--placement operand); repeatable",
        )
        arg_parser.add_argument(
            "--jax-version",
            default=jax_compat.NEWEST_MODELLED,
            type=_jax_version,
            help="spell the fix for this JAX version (jax.memory.Space from 0.7.1, memory_kind= before)",
        )

    # ------------------------------------------------------------------ running
    def transform_module(self, tree: cst.Module) -> cst.Module:
        """Like ``CodemodCommand.transform_module`` (metadata, then scheduled imports), but
        without copying the tree first: the transform never mutates, so an unchanged module
        comes back as the same object and callers can skip regenerating its code."""
        if self.known_facts is not None and self.known_facts.module is tree:
            self.facts = self.known_facts
            tree = self._transform(tree)
        else:
            wrapper = MetadataWrapper(tree, unsafe_skip_copy=True)
            with self.resolve(wrapper):
                self.context = replace(self.context, wrapper=wrapper)
                try:
                    tree = self.transform_module_impl(tree)
                finally:
                    self.context = replace(self.context, wrapper=None)
        if AddImportsVisitor.CONTEXT_KEY in self.context.scratch:
            tree = AddImportsVisitor(self.context).transform_module(tree)
        return tree

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        # libcst types the resolved metadata as objects; PositionProvider's are CodeRanges
        positions = cast(Mapping[cst.CSTNode, CodeRange], self.metadata[PositionProvider])
        quote = self.style.quote if self.style is not None else None
        self.facts = SourceFacts.collect(tree, positions, self.line_map, self.reference_count, quote)
        return self._transform(tree)

    def _transform(self, tree: cst.Module) -> cst.Module:
        """Plan each target against ``self.facts`` (of ``tree``), then make the rewrites."""
        for target, outcome in zip(self.targets, self.outcomes):
            self.target, self.outcome = target, outcome
            if self.standalone and not self._lines_exist(tree, target):
                continue
            function = self.facts.find_function(target.function_name, target.function_line, target.inner_line)
            if function is None and self.plan_imported():
                continue
            if function is None and (self.NEEDS_FUNCTION or target.function_name or target.function_line):
                where = target.function_line or target.inner_line
                named = f"function {target.function_name}" if target.function_name else "function"
                self.report_problem(f"no {named}{f' at line {where}' if where else ''} in this file")
                continue
            self.plan(function)
        if self.standalone and self.problems and not self.edits and not self.satisfied:
            raise SkipFile("; ".join(dict.fromkeys(self.problems)))
        if not self.rewrites:
            return tree
        return tree.visit(_Rewriter(self.rewrites))

    def _lines_exist(self, tree: cst.Module, target: FunctionTarget) -> bool:
        last = len(tree.code.splitlines())
        wrong = [f"{flag} {line}" for flag, line in target.lines() if not 1 <= line <= last]
        if wrong:
            self.report_problem(f"{', '.join(wrong)} is not a line of this file ({last} lines)")
        return not wrong

    def claim(self, node: cst.CSTNode, rewrite: Rewrite) -> bool:
        """Register ``rewrite`` for ``node``; False if the node is taken already. Taken by
        another target of this run, the current target is deferred to a later run, which
        sees the first edit (taken by the current target: the same edit, nothing to do)."""
        owner = self.owners.get(node)
        if owner is not None:
            if owner is not self.outcome:
                self.outcome.deferred = True
            return False
        self.rewrites[node] = rewrite
        self.owners[node] = self.outcome
        return True

    def plan(self, function: FunctionInfo | None) -> None:
        """``function`` is ``None`` only for a command whose ``NEEDS_FUNCTION`` is false."""
        raise NotImplementedError

    def names_only_returned_parts(
        self, function: FunctionInfo, paths: Sequence[tuple[PathKey, ...]], return_lines: Sequence[int]
    ) -> bool:
        """Whether every output path names a part of every return of ``function`` that shows
        its parts (a literal tuple, list or dict); each one that does not is a problem, and
        from the command line the file is skipped: an edit of the whole return, or of the
        wrong part, is never made in its place."""
        wrong = [
            f"output {format_output_path(keys) or WHOLE_RESULT} names no part of what {function.name} returns "
            f"at line {line}: {why}"
            for line, value in returned_values(function, return_lines)
            for keys in paths
            if (why := no_part_at(self.facts, function.scope, value, keys)) is not None
        ]
        for problem in wrong:
            self.report_problem(problem)
        if wrong and self.standalone:
            raise SkipFile("; ".join(dict.fromkeys(wrong)))
        return not wrong

    def plan_imported(self) -> bool:
        """The target's function is not defined in this file: whether the command edits it here
        all the same (a jit of the imported function at ``inner_line``), having planned it."""
        return False

    # ------------------------------------------------------------------ recording
    def report_problem(self, message: str) -> None:
        self.outcome.problems.append(message)
        self.warn(message)

    def record(
        self, node: cst.CSTNode, description: str, reasons: list[str], subject: str = "", kept: Sequence[int] = ()
    ) -> None:
        """An edit at ``node``'s line (where its text changes or a statement goes in);
        ``kept``: the lines whose host compute it leaves (:attr:`Edit.host_compute_kept`)."""
        safety: EditSafety = "unsafe" if reasons else "safe"
        if reasons and self.standalone:  # libcst's tool writes it: what makes it unsafe is said there
            self.warn(f"line {self.facts.line(node)}: {description}: unsafe: {'; '.join(reasons)}")
        self.outcome.edits.append(
            Edit(self.facts.line(node), description, safety, "; ".join(reasons), subject, tuple(kept))
        )

    def already(self, note: str) -> None:
        self.outcome.satisfied.append(note)

    def code(self, node: cst.CSTNode) -> str:
        return self.facts.module.code_for_node(node)


class ShardingCommand(FixCommand):
    """Base of the fixes that write a sharding for the host value (a move back to device, a
    host output): they derive it from where the value comes from, in the target JAX version's
    spelling (:class:`HostValueTarget`)."""

    TARGET: ClassVar[type[FunctionTarget]] = HostValueTarget
    target: HostValueTarget

    # ------------------------------------------------------------------ names
    @property
    def spelling(self) -> jax_compat.Spelling:
        return self.target.spelling

    def jax_module(self) -> str:
        """The module's name for ``jax``; schedules ``import jax`` when it has none."""
        name = self.facts.aliases.jax_module()
        if name is None:
            self.add_needed_import("jax")
            name = "jax"
        return name

    def device_put_callee(self) -> str:
        return self.facts.aliases.imported_from_jax("device_put") or f"{self.jax_module()}.device_put"

    def parse(self, text: str) -> cst.BaseExpression:
        return cst.parse_expression(text, config=self.facts.module.config_for_parsing)

    def single_device_sharding(self, kind: str) -> cst.BaseExpression:
        jax = self.jax_module()
        q = self.facts.quote
        return self.parse(f"{jax}.sharding.SingleDeviceSharding({jax}.devices()[0], memory_kind={q}{kind}{q})")

    # ------------------------------------------------------------------ shardings in scope
    def fallback_sharding(
        self, kind: str, scope: Scope, line: int, where: str, moves: bool = False
    ) -> tuple[cst.BaseExpression, list[str]] | None:
        """A sharding of memory kind ``kind`` for code at ``line`` in ``scope`` when the move's
        own and the argument's shardings are not there: a sharding the module binds to a name
        (``DEVICE``, ``HOST = replicated(MESH)``) re-kinded, else one on a mesh it binds
        (``NamedSharding(MESH, P(), memory_kind=...)``), else ``SingleDeviceSharding`` on
        ``jax.devices()[0]`` where the module shows no sign of several devices. None (a problem
        reported, saying why) in a multi-device module with nothing to derive from: one device
        of several would fail the jit. A replicated one is safe for an output (it fits any
        shape); ``moves``: it moves a value, which it may gather onto every device."""
        quote = self.facts.quote
        found = self.scope_shardings(scope, line)
        found.sort(key=lambda name: self.memory_kind(name, scope) != kind)  # the kind wanted first
        for name in found:
            derived = (
                name if self.memory_kind(name, scope) == kind else sx.with_memory_kind(name.deep_clone(), kind, quote)
            )
            if derived is None:
                continue
            if self.is_replicated(name, scope):
                return derived, [_replicates(name.value, where)] if moves else []
            return derived, [f"built from `{name.value}`, a sharding in scope: its partition spec may not fit {where}"]
        mesh = next(iter(self.scope_meshes(scope, line)), None)
        if mesh is not None:
            named = self.facts.aliases.locals_of("jax.sharding.NamedSharding")
            spec = self.facts.aliases.locals_of("jax.sharding.PartitionSpec") or self.facts.aliases.locals_of("jax.P")
            jax = self.jax_module() if not (named and spec) else ""
            callee = named[0] if named else f"{jax}.sharding.NamedSharding"
            empty = f"{spec[0]}()" if spec else f"{jax}.sharding.PartitionSpec()"
            built = self.parse(f"{callee}({mesh.value}, {empty}, memory_kind={quote}{kind}{quote})")
            return built, [_replicates(f"{mesh.value}'s devices", where)] if moves else []
        evidence = self.multi_device_evidence()
        if evidence is not None:
            self.report_problem(
                f"no sharding or mesh is bound to a name in scope at line {line} to build {where}'s "
                f"{kind} sharding from, and the program uses several devices ({evidence}): "
                "jax.devices()[0] would put it on one of them"
            )
            return None
        return self.single_device_sharding(kind), [SINGLE_DEVICE_REASON]

    def scope_shardings(self, scope: Scope, line: int) -> list[cst.Name]:
        """Names bound once, in ``scope`` and the scopes around it, to a sharding (not a tree
        of them) that code at ``line`` can read, nearest scope first."""
        return self._scope_names(scope, line, lambda value, bound_in: self.value_kind(value, bound_in) == "sharding")

    def scope_meshes(self, scope: Scope, line: int) -> list[cst.Name]:
        """Names bound once to a mesh (``Mesh(...)``, ``jax.make_mesh(...)``) that code at
        ``line`` in ``scope`` can read."""

        def is_mesh(value: cst.BaseExpression, bound_in: Scope) -> bool:
            return isinstance(value, cst.Call) and last_name(value.func) in _MESH_CONSTRUCTORS

        return self._scope_names(scope, line, is_mesh)

    def _scope_names(
        self, scope: Scope, line: int, accept: Callable[[cst.BaseExpression, Scope], bool]
    ) -> list[cst.Name]:
        names: list[cst.Name] = []
        current: Scope | None = scope
        while current is not None:
            if current is scope or current.kind != "class":
                for name in current.bindings:
                    binding = current.single_value(name)
                    node = cst.Name(name)
                    if (
                        binding is not None
                        and binding.value is not None
                        and binding.kind != "import"
                        and self.facts.scope_chain_binding(name, scope) == (binding, current)
                        and accept(binding.value, current)
                        and self.facts.visible(node, scope, line)
                    ):
                        names.append(node)
            current = current.parent
        return names

    def is_replicated(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """The sharding is visibly replicated (``NamedSharding(mesh, P())``, re-kinded or not):
        it fits an array of any shape on that mesh."""
        for _ in range(8):
            while isinstance(expr, cst.Name):
                found = self.facts.scope_chain_binding(expr.value, scope)
                if found is None or found[0].value is None:
                    return False
                expr, scope = found[0].value, found[1]
            if not isinstance(expr, cst.Call):
                return False
            name = last_name(expr.func)
            if name == "with_memory_kind" and isinstance(expr.func, cst.Attribute):
                expr = expr.func.value
                continue
            if name == "NamedSharding":
                positional = [a for a in expr.args if a.keyword is None and not a.star]
                spec_arg = sx.keyword(expr, "spec")
                spec = (
                    spec_arg.value if spec_arg is not None else (positional[1].value if len(positional) > 1 else None)
                )
                spec = self._through_name(spec, scope) if spec is not None else None
                return (
                    isinstance(spec, cst.Call)
                    and not spec.args
                    and (self.facts.aliases.qualify(spec.func) or "").rpartition(".")[2] in ("PartitionSpec", "P")
                )
            helper = self._helper(expr, scope)
            if helper is not None:
                values = [site.node.value for site in helper.returns]
                return all(value is not None and self.is_replicated(value, helper.scope) for value in values)
            return name == "SingleDeviceSharding"
        return False

    def multi_device_evidence(self) -> str | None:
        """What in the module says the program runs on several devices (a mesh, a named
        sharding, a partition spec, ``shard_map``, every device of ``jax.devices()``), or None."""
        if self._evidence is None:
            self._evidence = _MultiDeviceEvidence(self.facts)
            self.facts.module.visit(self._evidence)
        return self._evidence.found

    # ------------------------------------------------------------------ memory kinds
    def memory_kind(self, expr: cst.BaseExpression, scope: Scope) -> str | None:
        """The memory kind ``expr`` spells, through names bound once (``ON_DEVICE``)."""
        seen = 0
        while isinstance(expr, cst.Name) and seen < 8:
            found = self.facts.scope_chain_binding(expr.value, scope)
            if found is None or found[0].value is None:
                return None
            expr, scope, seen = found[0].value, found[1], seen + 1
        return sx.memory_kind_literal(expr)

    def value_kind(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> str:
        """What a sharding expression is, through names bound once: ``none``, ``sharding``
        (a sharding constructor, ``.with_memory_kind(...)``, ``x.sharding``), ``container`` (a
        tuple/list/dict of them), ``space`` (``jax.memory.Space``) or ``unknown`` (a parameter,
        a call: the source does not say)."""
        seen = 0
        while isinstance(expr, cst.Name) and not sx.is_none(expr) and seen < 8:
            found = self.facts.scope_chain_binding(expr.value, scope)
            if found is None or found[0].value is None:
                return "unknown"
            expr, scope, seen = found[0].value, found[1], seen + 1
        if sx.is_none(expr):
            return "none"
        if isinstance(expr, (cst.Tuple, cst.List, cst.Dict)) or (
            isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict"
        ):
            return "container"
        if sx.is_memory_space(expr):
            return "space"
        if isinstance(expr, cst.Call) and last_name(expr.func) in (
            *SHARDING_CONSTRUCTORS,
            "with_memory_kind",
            "Format",
        ):
            return "sharding"
        if isinstance(expr, cst.Attribute) and expr.attr.value == "sharding":
            return "sharding"
        if isinstance(expr, cst.Call) and depth < 4 and self._sharding_helper(expr, scope, depth):
            return "sharding"
        return "unknown"

    def _sharding_helper(self, call: cst.Call, scope: Scope, depth: int) -> bool:
        """``replicated(MESH)``: a call of a function of this file whose every return is
        visibly a sharding (the user's ``NamedSharding`` helper)."""
        helper = self._helper(call, scope)
        values = [site.node.value for site in helper.returns] if helper is not None else []
        return bool(values) and all(
            value is not None and self.value_kind(value, helper.scope, depth + 1) == "sharding"  # type: ignore[union-attr]
            for value in values
        )

    def _helper(self, call: cst.Call, scope: Scope) -> FunctionInfo | None:
        """The module-level ``def`` a plain call names (not a name an assignment binds)."""
        if not isinstance(call.func, cst.Name) or self.facts.scope_chain_binding(call.func.value, scope) is not None:
            return None
        name = call.func.value
        helpers = [
            f
            for f in self.facts.functions
            if f.name == name and f.class_name is None and f.scope.parent is self.facts.module_scope
        ]
        return helpers[0] if len(helpers) == 1 else None

    def is_device_move(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """``device_put(x, <device memory>)``: already moved back (its destination may be a
        name bound to a device sharding)."""
        if not (isinstance(expr, cst.Call) and self.facts.aliases.qualify(expr.func) == DEVICE_PUT):
            return False
        destination = sx.device_put_destination(expr)
        return destination is not None and self.memory_kind(destination, scope) in sx.DEVICE_KINDS

    # ------------------------------------------------------------------ jit options
    def option(self, site: JitSite, name: str) -> cst.Arg | None:
        """The ``in_shardings``/``out_shardings`` argument of a jit site, keyword or positional."""
        if site.options is None:
            return None
        found = sx.keyword(site.options, name)
        if found is not None or site.kind != "call":
            return found
        index = _POSITIONAL_OPTIONS[name]
        args = site.options.args
        if len(args) > index and all(a.keyword is None and not a.star for a in args[: index + 1]):
            return args[index]
        return None

    def origin_destination(self, function: FunctionInfo) -> tuple[cst.BaseExpression, Scope] | None:
        """The destination of the move to host the target's origin points at."""
        t = self.target
        if t.origin_line is None:
            return None
        found = self.facts.device_put_at(t.origin_line, t.origin_col)
        if found is None:
            return None
        call, scope = found
        destination = sx.device_put_destination(call)
        return (destination, scope) if destination is not None else None

    def host_in_sharding(self, function: FunctionInfo) -> tuple[cst.BaseExpression, JitSite] | None:
        """The ``in_shardings`` entry of the host argument (down to ``parameter_path`` inside
        it, through names bound once to literals): the target's parameter when it is known,
        else the one entry that spells out a host memory kind."""
        for site in self.facts.jit_sites(function):
            arg = self.option(site, "in_shardings")
            if arg is None:
                continue
            value = self._through_name(arg.value, site.scope)
            if not isinstance(value, (cst.Tuple, cst.List)):
                entry: cst.BaseExpression | None = arg.value
            else:
                entries = [e.value for e in value.elements if isinstance(e, cst.Element)]
                index = self._argument_index(function, site)
                hosts = [e for e in entries if self._spells_host(e, site.scope)]
                if index is not None and index < len(entries):
                    entry = entries[index]
                else:
                    entry = hosts[0] if len(hosts) == 1 else None
            if entry is not None:
                entry = self._leaf_for(entry, parse_output_path(self.target.parameter_path), site.scope)
            if entry is not None and not sx.is_none(entry):
                return entry, site
        return None

    def _leaf_for(
        self, entry: cst.BaseExpression, keys: tuple[PathKey, ...], scope: Scope
    ) -> cst.BaseExpression | None:
        """The sharding that covers ``keys`` inside an ``in_shardings`` entry; None when the
        path ends on a container (several shardings)."""
        for depth, key in enumerate(keys):
            container = self._through_name(entry, scope)
            if not isinstance(container, (cst.Tuple, cst.List, cst.Dict)):
                if self.value_kind(entry, scope) in ("sharding", "space"):
                    return entry  # one sharding, a pytree prefix of the whole subtree
                return self._indexed(entry, keys[depth:])
            child = child_at(container, key)
            if child is None:
                return None
            entry = child
        return None if isinstance(self._through_name(entry, scope), (cst.Tuple, cst.List, cst.Dict)) else entry

    def _indexed(self, tree: cst.BaseExpression, keys: tuple[PathKey, ...]) -> cst.BaseExpression:
        """``tree`` (a tree of shardings the source does not spell, ``make_shardings()``'s
        result) indexed as the argument is: ``SH["opt"]``, ``SH.momentum``, ``SH[1]``."""
        quote = self.facts.quote
        for kind, key in keys:
            if kind == "attr":
                tree = cst.Attribute(value=tree, attr=cst.Name(str(key)))
            else:
                index = cst.Integer(str(key)) if kind == "index" else cst.SimpleString(f"{quote}{key}{quote}")
                tree = cst.Subscript(value=tree, slice=[cst.SubscriptElement(cst.Index(index))])
        return tree

    def _argument_index(self, function: FunctionInfo, site: JitSite) -> int | None:
        t = self.target
        params = list(function.positional_params)
        if site.kind == "call" and function.class_name is not None and params:
            params = params[1:]  # jax.jit(self.method): bound, so no self
        static = self._static_argnums(site)
        kept = [p for i, p in enumerate(params) if i not in static]
        if t.parameter in kept:
            return kept.index(t.parameter)
        if t.parameter is None and t.parameter_index is not None:
            return t.parameter_index
        return None

    def _static_argnums(self, site: JitSite) -> set[int]:
        arg = sx.keyword(site.options, "static_argnums") if site.options is not None else None
        if arg is None:
            return set()
        values = arg.value.elements if isinstance(arg.value, (cst.Tuple, cst.List)) else [arg.value]
        numbers = set()
        for value in values:
            number = value.value if isinstance(value, cst.Element) else value
            if isinstance(number, cst.Integer):
                numbers.add(int(number.evaluated_value))
        return numbers

    def _through_name(self, expr: cst.BaseExpression, scope: Scope) -> cst.BaseExpression:
        if isinstance(expr, cst.Name):
            found = self.facts.scope_chain_binding(expr.value, scope)
            if found is not None and found[0].value is not None:
                return found[0].value
        return expr

    def _spells_host(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        return sx.memory_kind_literal(self._through_name(expr, scope)) in sx.HOST_KINDS


_MESH_CONSTRUCTORS = ("Mesh", "make_mesh", "AbstractMesh")
_MULTI_DEVICE_NAMES = frozenset({*_MESH_CONSTRUCTORS, "NamedSharding", "PartitionSpec", "shard_map", "pmap"})
SINGLE_DEVICE_REASON = (
    "jax.devices()[0]: no sharding or mesh is bound to a name in scope to derive this one from, and it "
    "assumes a single-device program (the module shows none of Mesh, NamedSharding, PartitionSpec, "
    "shard_map, or jax.devices() beyond the first)"
)


def _replicates(over: str, where: str) -> str:
    return (
        f"{where} is replicated over {over} (a replicated sharding, not the value's own, which is not "
        "in scope here): it may be gathered onto every device"
    )


class _MultiDeviceEvidence(cst.CSTVisitor):
    """Finds the first sign of a multi-device program: a name that stands for a mesh, a named
    sharding, a partition spec, ``shard_map`` or ``pmap``, or ``jax.devices()`` used other than
    as ``jax.devices()[0]``."""

    def __init__(self, facts: SourceFacts) -> None:
        super().__init__()
        self.facts = facts
        self.found: str | None = None

    def _note(self, node: cst.CSTNode, what: str) -> None:
        if self.found is None:
            self.found = f"{what} at line {self.facts.line(node)}"

    def visit_Name(self, node: cst.Name) -> None:
        self._qualified(node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self._qualified(node)
        return False

    def _qualified(self, node: cst.Name | cst.Attribute) -> None:
        qualname = self.facts.aliases.qualify(node) or ""
        if qualname.startswith("jax") and qualname.rpartition(".")[2] in _MULTI_DEVICE_NAMES:
            self._note(node, f"`{self.facts.module.code_for_node(node)}`")

    def visit_Call(self, node: cst.Call) -> None:
        if self.facts.aliases.qualify(node.func) == "jax.devices":
            self._devices.append(node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if isinstance(node.value, cst.Call) and len(node.slice) == 1:
            index = node.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                self._first.add(node.value)

    def visit_Module(self, node: cst.Module) -> None:
        self._devices: list[cst.Call] = []
        self._first: set[cst.Call] = set()

    def leave_Module(self, original_node: cst.Module) -> None:
        for call in self._devices:
            if call not in self._first:
                self._note(call, "`jax.devices()`")


class _Rewriter(cst.CSTTransformer):
    """Applies rewrites keyed by original node; nested rewrites see the inner result."""

    def __init__(self, rewrites: dict[cst.CSTNode, Rewrite]) -> None:
        super().__init__()
        self.rewrites = rewrites

    # libcst types on_leave as returning the node's own type; a rewrite may return another
    # expression (a name becomes a call), which libcst accepts where the field allows it
    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        rewrite = self.rewrites.get(original_node)
        return rewrite(updated_node) if rewrite is not None else updated_node


def _target_from_flags(cls: type[FunctionTarget], flags: dict[str, Any]) -> FunctionTarget:
    """``cls``'s target from the flags of :meth:`FixCommand.add_args` (those it has fields for)."""
    paths = flags.get("output_path") or [""]
    values: dict[str, Any] = {
        "function_name": flags.get("function_name"),
        "function_line": flags.get("function_line"),
        "inner_line": flags.get("inner_line"),
        "output_paths": tuple(paths),
        "placement": flags.get("placement") or "return",
        "return_lines": tuple(flags.get("return_line") or ()),
        "parameter": flags.get("parameter"),
        "parameter_index": flags.get("parameter_index"),
        "parameter_path": str(flags.get("parameter_path") or ""),
        "parameter_leaves": tuple(flags.get("parameter_leaf") or ()),
        "origin_line": flags.get("origin_line"),
        "origin_col": flags.get("origin_col"),
        "compute_spans": tuple((line, 1) for line in flags.get("compute_line") or ()),
        "output_kinds": tuple(flags.get("output_kind") or ()),
        "spelling": jax_compat.spelling(flags.get("jax_version") or jax_compat.NEWEST_MODELLED),
        "eager_line": flags.get("eager_line"),
        "eager_col": flags.get("eager_col"),
        "eager_end_col": flags.get("eager_end_col"),
        "operand_index": flags.get("operand_index") or 0,
    }
    return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})


def _line(text: str) -> int:
    return _counted_from_one(text, "line")


def _column(text: str) -> int:
    return _counted_from_one(text, "column")


def _counted_from_one(text: str, what: str) -> int:
    """A line or column number as diagnostics give them (from 1), else argparse's usage error."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"not a {what} number: {text!r}")
    return number


def _jax_version(text: str) -> str:
    try:
        jax_compat.check_modelled(text)
    except jax_compat.UnsupportedJaxVersion as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return text


def _pytree_path(text: str) -> str:
    try:
        parse_output_path(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return text


def _shown_output_path(text: str) -> str:
    try:
        return shown_output_path(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _output_kind(text: str) -> tuple[str, str]:
    path, sep, kind = text.rpartition("=")
    if not sep or not kind:
        raise argparse.ArgumentTypeError(f"expected PATH=KIND, got {text!r}")
    return _pytree_path(path), kind
