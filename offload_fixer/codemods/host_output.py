"""Codemod: declare an offending output as host memory in its jit's ``out_shardings``.

Every jit site of the function is edited: ``@jax.jit`` (becomes
``@partial(jax.jit, out_shardings=...)``), ``@partial(jax.jit, ...)``,
``@functools.partial(jax.jit, ...)``, ``@jax.jit(...)``, ``g = jax.jit(f, ...)``,
``jax.jit(f, ...)(x)`` and ``partial(jax.jit, ...)(f)``, methods included.

* ``out_shardings`` absent: a pytree prefix shaped like the returned value is added, with
  ``None`` (unspecified: what an absent ``out_shardings`` means in every JAX version) for
  every other output and an explicit host sharding for the offending ones; where the returns
  do not show the structure (``return new_params, loss``), the analysis's output tree
  (``HostOutputTarget.output_kinds``) spells it, and a sub-tree whose outputs all need it gets one
  sharding;
* an existing leaf: ``NamedSharding(...)``/``SingleDeviceSharding(...)`` get ``memory_kind=``
  added or replaced, ``s.with_memory_kind(k)`` gets its literal replaced, any other
  expression ``e`` becomes ``e.with_memory_kind("pinned_host")``;
* a leaf that covers a subtree holding the output (a prefix) is expanded into that subtree's
  shape, repeating the leaf for the siblings;
* a name bound to a tree of shardings (``OPT_SHARDINGS``) is left as it is for its other
  uses: ``{**OPT_SHARDINGS, "count": ...}`` (``(T[0], ..., T[2])`` for a tuple) replaces it
  here, and a whole tree becomes ``jax.tree.map(lambda s: s.with_memory_kind(...), T)``;
* an expression that is not visibly a sharding (a parameter, a call) is not guessed at:
  ``e.with_memory_kind(...)`` on a tree or on ``None`` would fail when the module is imported;
* ``None`` at the output, or no ``out_shardings``: the host sharding comes from, in order, the
  move to host's own sharding, the host argument's ``in_shardings`` entry (both safe), another
  output's sharding re-kinded, an input's sharding re-kinded, the inline call's argument
  ``x.sharding`` re-kinded, ``SingleDeviceSharding(jax.devices()[0], ...)`` (unsafe: single
  device). Only names in scope at the jit site are used.

    python -m libcst.tool codemod host_output.HostOutputCommand train.py \\
        --function-line 12 --output-path "[1]" --origin-line 15 --no-format

Over 500 lines on purpose: one codemod, whose out_shardings forms (none, a leaf, a tree, a
call) share the jit site being rewritten.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

from offload_fixer.codemods import sharding_exprs as sx
from offload_fixer.codemods.fix_command import ShardingCommand
from offload_fixer.codemods.pytree_source import (
    OutputTree,
    build_like,
    child_at,
    drop_covered,
    locate,
    returned_values,
    structure_mismatch,
)
from offload_fixer.codemods.source_facts import FunctionInfo, JitSite, Scope
from offload_fixer.codemods.targets import FunctionTarget, HostValueTarget, Placement
from offload_fixer.codes import HOST_VALUE_DEVICE_OUTPUT
from offload_fixer.model import PathKey, format_output_path, parse_output_path

Keys = tuple[PathKey, ...]


@dataclass(frozen=True)
class HostOutputTarget(HostValueTarget):
    """The outputs to declare host memory (pytree paths relative to the returned value), the
    returns that show their structure, and every output's memory kind when known."""

    output_paths: tuple[str, ...] = ("",)
    return_lines: tuple[int, ...] = ()
    """Read only the returns starting on these lines; empty means every return."""
    output_kinds: tuple[tuple[str, str], ...] = ()
    """Every flat output of the function as (pytree path, memory kind), when known: the
    structure ``out_shardings`` must mirror and which outputs are host memory already."""
    parameter_leaves: tuple[str, ...] = ()
    """Paths inside ``parameter`` of its host leaves (``"['mu']"``); empty: all of it."""


class HostOutputCommand(ShardingCommand):
    DESCRIPTION = "Declare host outputs as pinned_host memory in jax.jit's out_shardings (XLA error 1200)."
    STRATEGY = "host"
    FIXES: ClassVar[Mapping[Placement, frozenset[str]]] = {"out_shardings": frozenset({HOST_VALUE_DEVICE_OUTPUT})}
    TARGET: ClassVar[type[FunctionTarget]] = HostOutputTarget
    target: HostOutputTarget

    def plan(self, function: FunctionInfo | None) -> None:
        assert function is not None, "NEEDS_FUNCTION"
        self._function = function
        sites = self.facts.jit_sites(function)
        if not sites:
            self.report_problem(
                f"no jax.jit site for {function.name} in this file (it may be jitted elsewhere): "
                "out_shardings cannot be edited here"
            )
            return
        paths = drop_covered([parse_output_path(p) for p in self.target.output_paths])
        if not self.names_only_returned_parts(function, paths, self.target.return_lines):
            return
        for site in sites:
            self._fix_site(function, site, paths)

    def plan_imported(self) -> bool:
        """The jit at ``inner_line`` of a function another module defines (``jax.jit(train_step,
        in_shardings=(state_sh, ...))`` in a package's ``__main__.py``): the state the streamed
        parameter becomes goes out as it came in, ``out_shardings`` giving the returned state
        the parameter's own ``in_shardings`` entry, at the smallest sub-tree holding its host
        leaves (``({"opt": state_sh["opt"], "params": None}, None)``). The returns are in the
        other file: the structure comes from the output tree, its sequences spelled as tuples
        (the planner asks only where every return there is one)."""
        t = self.target
        if t.function_name is None or t.inner_line is None:
            return False
        sites = self.facts.jit_sites_of_name(t.function_name, t.inner_line)
        if not sites:
            return False
        tree = self.output_tree()
        leaves = [parse_output_path(p) for p in t.parameter_leaves] or [()]
        state = drop_covered([parse_output_path(p) for p in t.output_paths])
        prefixes = {
            keys[: len(keys) - len(leaf)] for keys in state for leaf in leaves if keys[len(keys) - len(leaf) :] == leaf
        }
        common = leaves[0]
        for leaf in leaves[1:]:
            common = common[
                : next((i for i, (a, b) in enumerate(zip(common, leaf)) if a != b), min(len(common), len(leaf)))
            ]
        for site in sites:
            where = f"the jit of {t.function_name} on line {site.line}"
            entry = self._parameter_entry(site)
            if tree is None or len(prefixes) != 1 or entry is None or t.parameter_index is None:
                self.report_problem(
                    f"{where} jits a function defined in another file: the state it returns is not "
                    "visibly the parameter's tree, whose in_shardings entry could keep it host memory"
                )
                continue
            assert site.options is not None, "a jit call carries its options"
            if self.option(site, "out_shardings") is not None or any(a.star for a in site.options.args):
                self.report_problem(f"{where} already gives out_shardings (or **kwargs): not edited from another file")
                continue
            (at,) = prefixes
            host = self.code(self._indexed_entry(entry, common, site.scope))
            value, why = tree.prefix((), [(*at, *common)], host, "None", self.facts.quote, sequences="tuple")
            if value is None:
                self.report_problem(f"{where}: {why}")
                continue
            if self.claim(site.options, _appending(self._keyword_arg("out_shardings", value))):
                label = _label((*at, *common))
                self.record(
                    site.node,
                    f"declare {label} as it comes in ({host}) at the jit on line {site.line}: out_shardings={value}",
                    [],
                    label,
                )
        return True

    def _keyword_arg(self, name: str, value: str) -> cst.Arg:
        return cst.Arg(
            keyword=cst.Name(name),
            value=self.parse(value),
            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
        )

    def _parameter_entry(self, site: JitSite) -> cst.BaseExpression | None:
        """The ``in_shardings`` entry of the target's parameter (by its position) at ``site``."""
        arg = self.option(site, "in_shardings")
        index = self.target.parameter_index
        if arg is None or index is None or self._static_argnums(site):
            return None
        value = self._through_name(arg.value, site.scope)
        if isinstance(value, (cst.Tuple, cst.List)):
            entries = [e.value for e in value.elements if isinstance(e, cst.Element)]
            return entries[index] if index < len(entries) and not sx.is_none(entries[index]) else None
        return None

    def _indexed_entry(self, entry: cst.BaseExpression, keys: Keys, scope: Scope) -> cst.BaseExpression:
        """The sub-tree at ``keys`` of an ``in_shardings`` entry: a literal's child, else the
        tree indexed (``state_sh["opt"]``)."""
        for depth, key in enumerate(keys):
            container = self._through_name(entry, scope)
            child = child_at(container, key) if isinstance(container, (cst.Tuple, cst.List, cst.Dict)) else None
            if child is None:
                return self._indexed(entry, keys[depth:])
            entry = child
        return entry

    def _fix_site(self, function: FunctionInfo, site: JitSite, paths: list[Keys]) -> None:
        existing = self.option(site, "out_shardings")
        if existing is not None:
            self._edit_existing(function, site, existing.value, paths)
        elif site.options is not None and any(a.star == "**" for a in site.options.args):
            self.report_problem(
                f"the jit at line {site.line} takes options from **kwargs; cannot tell its out_shardings"
            )
        else:
            self._add(function, site, paths)

    # ------------------------------------------------------------------ no out_shardings yet
    def _add(self, function: FunctionInfo, site: JitSite, paths: list[Keys]) -> None:
        host = self.host_sharding(function, site, None)
        if host is None:
            return
        host_expr, reasons = host
        value = self._shaped_like_returns(function, (), paths, self.code(host_expr), "None", site)
        if value is None or not self._fits_returns(function, site, (), value):
            return
        if site.kind == "bare_decorator":
            partial = self._partial_callee()
            jit_code = self.code(site.node)
            claimed = self.claim(site.node, lambda updated: self.parse(f"{partial}({jit_code}, out_shardings={value})"))
        else:
            assert site.options is not None
            new_arg = cst.Arg(
                keyword=cst.Name("out_shardings"),
                value=self.parse(value),
                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
            )
            claimed = self.claim(site.options, lambda updated: sx.append_arg(_as_call(updated), new_arg))
        if not claimed:
            return
        self.record(
            site.node,
            f"declare {self._labels(paths)} as {self.spelling.host_kind} memory at the jit "
            f"on line {site.line}: out_shardings={value}",
            reasons,
            self._labels(paths),
        )

    # ------------------------------------------------------------------ editing out_shardings
    def _edit_existing(
        self, function: FunctionInfo, site: JitSite, root: cst.BaseExpression, paths: list[Keys]
    ) -> None:
        reasons: list[str] = []
        if isinstance(root, cst.Name) and not sx.is_none(root):
            found = self.facts.scope_chain_binding(root.value, site.scope)
            if found is not None and isinstance(found[0].value, (cst.Tuple, cst.List, cst.Dict)):
                if self.facts.references(root.value) > 2:
                    reasons.append(f"`{root.value}` is used elsewhere too, and those uses change with it")
                root = found[0].value
        groups: dict[cst.BaseExpression, list[tuple[Keys, Keys]]] = {}
        for keys in paths:
            leaf, depth = _descend(root, keys)
            if leaf is None:
                self.report_problem(
                    f"out_shardings at line {site.line} does not match the output structure at {format_output_path(keys)}"
                )
                continue
            groups.setdefault(leaf, []).append((keys[:depth], keys[depth:]))
        for leaf, items in groups.items():
            prefix = items[0][0]
            rests = [rest for _, rest in items]
            if any(not rest for rest in rests):
                self._rewrite_leaf(function, site, leaf, prefix, reasons)
            else:
                self._expand_leaf(function, site, leaf, prefix, rests, reasons)

    def _rewrite_leaf(
        self, function: FunctionInfo, site: JitSite, leaf: cst.BaseExpression, prefix: Keys, reasons: list[str]
    ) -> None:
        label = _label(prefix)
        if (
            self._spells_host(leaf, site.scope)
            or self.memory_kind(leaf, site.scope) in sx.HOST_KINDS
            or self._is_known_host(leaf, function)
        ):
            self.already(f"{label} is already declared host memory at the jit on line {site.line}")
            return
        if isinstance(leaf, (cst.Tuple, cst.List, cst.Dict)):
            for key in _literal_keys(leaf):
                child = child_at(leaf, key)
                assert child is not None
                self._rewrite_leaf(function, site, child, (*prefix, key), reasons)
            return
        kind = self.value_kind(leaf, site.scope)
        extra: list[str] = []
        if kind == "none":
            host = self.host_sharding(function, site, leaf)
            if host is None:
                return
            new, extra = host
        elif kind == "container":
            whole = self._host_tree(leaf, site)
            if whole is None:
                self.report_problem(
                    f"out_shardings for {label} is `{self.code(leaf)}`, a tree whose leaves are not "
                    "all visibly shardings: cannot declare each of them host memory"
                )
                return
            new = self.parse(whole)
        elif kind == "sharding" or self._single_output(prefix):
            changed = sx.with_memory_kind(leaf, self.spelling.host_kind, self.facts.quote)
            if changed is None:
                self.report_problem(
                    f"out_shardings for {label} is `{self.code(leaf)}`, which cannot carry a memory kind"
                )
                return
            new = changed
            if kind != "sharding":
                extra = [
                    f"`{self.code(leaf)}` is taken for the sharding of {label} (a single array); the source "
                    "does not show it is one, and None there would fail"
                ]
        else:
            self.report_problem(
                f"out_shardings for {label} is `{self.code(leaf)}`, which the source does not show to "
                "be a sharding (it could be a tree of shardings or None): cannot give it a memory kind"
            )
            return
        if not self.claim(leaf, lambda updated: new):
            return
        self.record(
            leaf,
            f"declare {label} as {self.spelling.host_kind} memory at the jit on line {site.line}: "
            f"`{self.code(leaf)}` -> `{self.code(new)}`",
            [*reasons, *extra],
            label,
        )

    def _expand_leaf(
        self,
        function: FunctionInfo,
        site: JitSite,
        leaf: cst.BaseExpression,
        prefix: Keys,
        rests: list[Keys],
        reasons: list[str],
    ) -> None:
        """One sharding (or None) covers a subtree holding the outputs: spell the subtree out.
        A name bound to a tree of shardings keeps its other uses: it is patched here."""
        kind = self.value_kind(leaf, site.scope)
        full = [(*prefix, *rest) for rest in rests]
        if kind == "sharding" and (
            self.memory_kind(leaf, site.scope) in sx.HOST_KINDS or self._is_known_host(leaf, function)
        ):
            self.already(f"{self._labels(full)} are already declared host memory at the jit on line {site.line}")
            return
        if kind == "container":
            patched = self._patched(self.code(leaf), leaf, rests, site)
            if patched is None:
                return
            if not self.claim(leaf, lambda updated: self.parse(patched)):
                return
            self.record(
                leaf,
                f"declare {self._labels(full)} as {self.spelling.host_kind} memory at the jit on line "
                f"{site.line}, keeping `{self.code(leaf)}` for its other outputs: `{patched}`",
                reasons,
                self._labels(full),
            )
            return
        if kind == "unknown":
            self.report_problem(
                f"out_shardings for {_label(prefix)} is `{self.code(leaf)}`, which the source does not "
                "show to be a sharding or a tree of them: cannot tell how it covers "
                f"{self._labels(full)}"
            )
            return
        if sx.is_none(leaf):
            host = self.host_sharding(function, site, leaf)
            if host is None:
                return
            target_text, extra, sibling = self.code(host[0]), host[1], "None"
        else:
            new = sx.with_memory_kind(leaf, self.spelling.host_kind, self.facts.quote)
            if new is None:
                self.report_problem(
                    f"out_shardings for {_label(prefix)} is `{self.code(leaf)}`, which cannot carry a memory kind"
                )
                return
            target_text, extra, sibling = self.code(new), [], self.code(leaf)
        value = self._shaped_like_returns(function, prefix, rests, target_text, sibling, site)
        if value is None or not self._fits_returns(function, site, prefix, value):
            return
        if not self.claim(leaf, lambda updated: self.parse(value)):
            return
        self.record(
            leaf,
            f"declare {self._labels(full)} as {self.spelling.host_kind} memory at the jit on line "
            f"{site.line}: `{self.code(leaf)}` -> `{value}`",
            [*reasons, *extra],
            self._labels(full),
        )

    def _shaped_like_returns(
        self, function: FunctionInfo, prefix: Keys, rests: list[Keys], target_text: str, other_text: str, site: JitSite
    ) -> str | None:
        """A prefix for the sub-tree at ``prefix`` with ``target_text`` at ``rests``: shaped
        like the returns, and like the output tree where they do not show the structure."""
        if rests == [()]:
            return target_text
        tree = self.output_tree()
        why: list[str] = []
        texts: list[str | None] = []
        shapes: set[str | None] = set()  # dict keys sorted: returns may list them in any order
        for _, value in returned_values(function, self.target.return_lines):
            located = locate(self.facts, function.scope, value, prefix)
            if located.rest:
                texts.append(None)
                shapes.add(None)
                continue
            args = (self.facts, function.scope, located.node, rests, target_text, other_text)
            texts.append(build_like(*args, tree=tree, at=prefix, why=why))
            shapes.add(build_like(*args, sort_keys=True, tree=tree, at=prefix))
        if texts and len(shapes) == 1 and None not in shapes:
            return texts[0]
        if tree is not None:
            text, reason = tree.prefix(prefix, rests, target_text, other_text, self.facts.quote)
            if text is not None:
                return text
            why.append(reason)
        detail = f": {why[-1]}" if why else ""
        self.report_problem(
            f"the returns of {function.name} do not show one structure around "
            f"{self._labels([(*prefix, *r) for r in rests])}, which out_shardings at line {site.line} must mirror"
            f"{detail}"
        )
        return None

    def _fits_returns(self, function: FunctionInfo, site: JitSite, prefix: Keys, value: str) -> bool:
        """The ``out_shardings`` (sub-)tree ``value`` for the outputs at ``prefix`` has the
        structure every return shows there (tuple arity, dict keys, fields); a problem, and no
        edit, where it does not: a fix that would not lower is never made."""
        tree = self.parse(value)
        for line, returned in returned_values(function, ()):
            located = locate(self.facts, function.scope, returned, prefix)
            if located.rest:
                continue
            why = structure_mismatch(self.facts, tree, site.scope, located.node, function.scope, prefix)
            if why is not None:
                self.report_problem(
                    f"the out_shardings this fix spells at line {site.line} does not fit the return at line {line}: {why}"
                )
                return False
        return True

    def output_tree(self) -> OutputTree | None:
        kinds = self.target.output_kinds
        return OutputTree(tuple((parse_output_path(path), kind) for path, kind in kinds)) if kinds else None

    def _single_output(self, prefix: Keys) -> bool:
        """The analysis saw exactly one array output at ``prefix``."""
        tree = self.output_tree()
        return tree is not None and [rest for rest, _ in tree.under(prefix)] == [()]

    # ------------------------------------------------------------------ trees of shardings
    def _host_tree(self, expr: cst.BaseExpression, site: JitSite) -> str | None:
        """Text of ``expr`` (a tree of shardings) with every leaf host memory; None when a leaf
        is not visibly a sharding."""
        kind = self.value_kind(expr, site.scope)
        quote, host_kind = self.facts.quote, self.spelling.host_kind
        if kind == "sharding":
            if self.memory_kind(expr, site.scope) == host_kind:
                return self.code(expr)
            changed = sx.with_memory_kind(expr, host_kind, quote)
            return self.code(changed) if changed is not None else None
        if kind != "container":
            return None
        literal = self._through_name(expr, site.scope) if isinstance(expr, cst.Name) else expr
        if isinstance(expr, cst.Name) and self._all_shardings(literal, site):
            return (
                f"{self.jax_module()}.{self.spelling.tree_map}(lambda s: s.with_memory_kind("
                f"{quote}{host_kind}{quote}), {expr.value})"
            )
        return self._patched(self.code(expr), expr, [()], site, whole=True)

    def _all_shardings(self, expr: cst.BaseExpression, site: JitSite) -> bool:
        kind = self.value_kind(expr, site.scope)
        if kind == "sharding":
            return True
        if kind != "container":
            return False
        literal = self._through_name(expr, site.scope)
        children = _children(literal)
        return children is not None and all(self._all_shardings(child, site) for child in children.values())

    def _patched(
        self, ref: str, expr: cst.BaseExpression, rests: list[Keys], site: JitSite, whole: bool = False
    ) -> str | None:
        """Text that reads ``ref`` (the code of a tree of shardings ``expr``), host memory at
        ``rests`` and as it was elsewhere: ``{**ref, "k": ...}``, ``(ref[0], ..., ref[2])``."""
        if any(not rest for rest in rests) and not whole:
            found = self._host_tree(expr, site)
            if found is None:
                host = self.host_sharding_text(site) if self.value_kind(expr, site.scope) == "none" else None
                if host is None:
                    self.report_problem(
                        f"`{ref}` is not visibly a sharding or a tree of them: cannot make it host memory"
                    )
                return host
            return found
        literal = self._through_name(expr, site.scope)
        children = _children(literal)
        if children is None:
            self.report_problem(
                f"`{ref}` is not visibly a tree of shardings: cannot reach "
                f"{', '.join(format_output_path(r) for r in rests)} inside it"
            )
            return None
        quote = self.facts.quote
        named = isinstance(expr, (cst.Name, cst.Attribute))
        pieces: dict[PathKey, str] = {}
        for key, child in children.items():
            sub = [rest[1:] for rest in rests if rest and rest[0] == key]
            if whole:
                sub = [()]
            if not sub:
                continue
            child_ref = (
                (f"{ref}[{quote}{key[1]}{quote}]" if key[0] == "key" else f"{ref}[{key[1]}]")
                if named
                else self.code(child)
            )
            if isinstance(child, (cst.Name, cst.Attribute)) and self.value_kind(child, site.scope) != "none":
                child_ref = self.code(child)
            text = self._patched(child_ref, child, sub, site)
            if text is None:
                return None
            pieces[key] = text
        missing = [rest for rest in rests if rest and rest[0] not in children]
        if missing:
            self.report_problem(f"`{ref}` has no entry for {', '.join(format_output_path(r) for r in missing)}")
            return None
        if isinstance(literal, cst.Dict):
            if named:
                return "{**" + ref + "".join(f", {quote}{k[1]}{quote}: {v}" for k, v in pieces.items()) + "}"
            return (
                "{"
                + ", ".join(
                    f"{self.code(e.key)}: {_piece(pieces, e, self.code(e.value))}"
                    for e in literal.elements
                    if isinstance(e, cst.DictElement)
                )
                + "}"
            )
        items = [
            pieces.get(("index", i), f"{ref}[{i}]" if named else self.code(child))
            for i, child in enumerate(children.values())
        ]
        if isinstance(literal, cst.List):
            return "[" + ", ".join(items) + "]"
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    def host_sharding_text(self, site: JitSite) -> str | None:
        host = self.host_sharding(self._function, site, None)
        return self.code(host[0]) if host is not None else None

    # ------------------------------------------------------------------ the host sharding
    def host_sharding(
        self, function: FunctionInfo, site: JitSite, at: cst.BaseExpression | None
    ) -> tuple[cst.BaseExpression, list[str]] | None:
        """An explicit host sharding usable at ``site``, and why it is unsafe if it is."""
        kind, quote = self.spelling.host_kind, self.facts.quote
        exact = []
        origin = self.origin_destination(function)
        if origin is not None:
            exact.append(origin)
        host_input = self.host_in_sharding(function)
        if host_input is not None:
            exact.append((host_input[0], host_input[1].scope))
        for source, written_in in exact:
            if sx.is_memory_space(source) or sx.is_transfer_to_memory_kind(self._bound_value(source, written_in)):
                continue  # a memory kind, not a sharding: out_shardings takes no such object
            if self.facts.portable(source, written_in, site.scope, site.line):
                copy = source.deep_clone()
                literal = sx.memory_kind_literal(source)
                return (copy if literal in (None, kind) else sx.with_memory_kind(copy, kind, quote)), []  # type: ignore[return-value]
        for source, why in self._related_shardings(site, at):
            if self.facts.visible(source, site.scope, site.line):
                derived = sx.with_memory_kind(source.deep_clone(), kind, quote)
                if derived is not None:
                    return derived, [] if self.is_replicated(source, site.scope) else [why]
        return self.fallback_sharding(kind, site.scope, site.line, _label(self._at_keys(at)))

    def _at_keys(self, at: cst.BaseExpression | None) -> Keys:
        paths = drop_covered([parse_output_path(p) for p in self.target.output_paths])
        return paths[0] if len(paths) == 1 and at is None else ()

    def _bound_value(self, source: cst.BaseExpression, written_in: Scope) -> cst.BaseExpression:
        """What a name bound once stands for (``host = TransferToMemoryKind(...)``); any other
        expression as it is."""
        if isinstance(source, cst.Name):
            found = self.facts.scope_chain_binding(source.value, written_in)
            if found is not None and found[0].value is not None:
                return found[0].value
        return source

    def _is_known_host(self, leaf: cst.BaseExpression, function: FunctionInfo) -> bool:
        """The leaf is the very sharding the value was moved to host with (or streamed in by)."""
        known = [self.origin_destination(function), self.host_in_sharding(function)]
        return any(found is not None and found[0].deep_equals(leaf) for found in known)

    def _related_shardings(
        self, site: JitSite, at: cst.BaseExpression | None
    ) -> Iterator[tuple[cst.BaseExpression, str]]:
        """Shardings of other outputs, then of inputs, then of the inline call's argument."""
        out = self.option(site, "out_shardings")
        for leaf in _leaves(out.value) if out is not None else []:
            if leaf is not at and not sx.is_none(leaf) and not sx.is_memory_space(leaf):
                yield (
                    leaf,
                    f"built from another output's sharding `{self.code(leaf)}`: its partition spec may not fit this output",
                )
        ins = self.option(site, "in_shardings")
        for leaf in _leaves(ins.value) if ins is not None else []:
            if not sx.is_none(leaf) and not sx.is_memory_space(leaf):
                yield (
                    leaf,
                    f"built from an input's sharding `{self.code(leaf)}`: its partition spec may not fit this output",
                )
        outer = self.facts.inline_calls.get(site.options) if site.options is not None else None
        if outer is not None and outer.args and outer.args[0].keyword is None and not outer.args[0].star:
            argument = outer.args[0].value
            if isinstance(argument, (cst.Name, cst.Attribute)):
                why = (
                    f"built from the argument's `{self.code(argument)}.sharding`: it must be a jax.Array "
                    "or ShapeDtypeStruct, and its partition spec may not fit this output"
                )
                yield cst.Attribute(value=argument, attr=cst.Name("sharding")), why

    def _partial_callee(self) -> str:
        aliases = self.facts.aliases
        if aliases.partial:
            return aliases.partial[0]
        if aliases.functools_modules:
            return f"{aliases.functools_modules[0]}.partial"
        self.add_needed_import("functools", "partial")
        return "partial"

    def _labels(self, paths: list[Keys]) -> str:
        return ", ".join(_label(p) for p in paths)


def _label(keys: Keys) -> str:
    return f"output {format_output_path(keys)}" if keys else "the result"


def _descend(root: cst.BaseExpression, keys: Keys) -> tuple[cst.BaseExpression | None, int]:
    """The out_shardings node for ``keys`` (or the leaf covering it) and how many keys it
    used; None when a literal container has no entry for the key."""
    node = root
    for depth, key in enumerate(keys):
        if not _is_container(node):
            return node, depth
        child = child_at(node, key)
        if child is None:
            return None, depth
        node = child
    return node, len(keys)


def _is_container(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Tuple, cst.List, cst.Dict)):
        return True
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "dict"


def _literal_keys(node: cst.BaseExpression) -> list[PathKey]:
    if isinstance(node, (cst.Tuple, cst.List)):
        return [("index", i) for i in range(len(node.elements))]
    keys: list[PathKey] = []
    for element in node.elements:  # type: ignore[attr-defined]
        if isinstance(element, cst.DictElement):
            value = element.key.evaluated_value if isinstance(element.key, (cst.SimpleString, cst.Integer)) else None
            if isinstance(value, int):
                keys.append(("index", value))
            elif isinstance(value, str):
                keys.append(("key", value))
    return keys


def _leaves(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(expr, (cst.Tuple, cst.List)):
        return [leaf for e in expr.elements for leaf in _leaves(e.value)]
    if isinstance(expr, cst.Dict):
        return [leaf for e in expr.elements if isinstance(e, cst.DictElement) for leaf in _leaves(e.value)]
    return [expr]


def _children(expr: cst.BaseExpression | None) -> dict[PathKey, cst.BaseExpression] | None:
    """The entries of a tuple/list/dict literal (or a ``dict(k=...)`` call, which
    :meth:`value_kind` calls a container too) by pytree key; None for anything else."""
    if isinstance(expr, (cst.Tuple, cst.List)):
        if any(isinstance(e, cst.StarredElement) for e in expr.elements):
            return None
        return {("index", i): e.value for i, e in enumerate(expr.elements)}
    if isinstance(expr, cst.Dict):
        out: dict[PathKey, cst.BaseExpression] = {}
        for element in expr.elements:
            if not isinstance(element, cst.DictElement) or _dict_key(element) is None:
                return None
            out[_dict_key(element)] = element.value  # type: ignore[index]
        return out
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Name)
        and expr.func.value == "dict"
        and all(arg.keyword is not None and not arg.star for arg in expr.args)
    ):
        return {("key", arg.keyword.value): arg.value for arg in expr.args if arg.keyword is not None}
    return None


def _appending(arg: cst.Arg) -> Callable[[cst.CSTNode], cst.CSTNode]:
    """A rewrite of a jit call that adds ``arg`` to its options."""
    return lambda updated: sx.append_arg(_as_call(updated), arg)


def _as_call(node: cst.CSTNode) -> cst.Call:
    """The jit call a claim on its options rewrites (still a call after earlier rewrites)."""
    assert isinstance(node, cst.Call)
    return node


def _piece(pieces: dict[PathKey, str], element: cst.DictElement, default: str) -> str:
    key = _dict_key(element)
    return pieces.get(key, default) if key is not None else default


def _dict_key(element: cst.DictElement) -> PathKey | None:
    value = sx.string_value(element.key)
    if value is not None:
        return ("key", value)
    if isinstance(element.key, cst.Integer):
        return ("index", int(element.key.evaluated_value))
    return None
