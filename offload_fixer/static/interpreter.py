"""An abstract interpreter over libcst trees for the code JAX would trace under ``jax.jit``.

It follows values from moves to host (``device_put`` to a host sharding, host
``in_shardings``) through assignments, unpacking, pytree literals, operators, array methods,
``jnp``/``lax`` calls, ``lax.scan``/``cond``/``while_loop`` bodies, helper functions of the same
file and nested jitted helpers, up to the ``return`` statements of each jitted function. It
never imports or runs the analysed code. Whatever it does not model yields ``UNKNOWN``.

The jobs, by module: this one finds the jit sites of a module, resolves names (imports of the
project's other modules, decorators) and reads a site's arguments from its ``in_shardings``
(a site may jit a transformed function: ``jax.jit(jax.grad(f))``); :mod:`.statements` runs
statements, :mod:`.expressions` evaluates expressions and calls, :mod:`.project_code` traces
the project's functions and classes, :mod:`.iteration` Python's iteration,
:mod:`.jax_api` and :mod:`.control_flow` say what each modelled JAX API does to memory kinds,
:mod:`.syntax` walks the syntax.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import libcst as cst

from offload_fixer.jax_compat import Regime
from offload_fixer.source.bindings import (
    Binding,
    BindingCollector,
    block_statements,
    inner_statements,
    parameter_names,
)

from . import jax_api, names
from .eager import EagerOperation, EagerRunner
from .evaluator import MAX_EVALUATIONS, Unsupported
from .expressions import ExpressionEvaluator
from .jax_api import argument_from_shardings, with_spelling
from .other_modules import OtherModules
from .project import ModuleFacts, Project, mutated_globals
from .project_code import ProjectCode
from .scopes import ForeignScope, Frame, NotCut, StaticScope
from .statements import StatementRunner
from .syntax import calls_in, header_expressions
from .values import (
    DEVICE_TREE,
    NONE,
    UNKNOWN,
    Bound,
    Const,
    Differentiated,
    Function,
    JitFactory,
    JitOptions,
    Jitted,
    Mapping,
    Ref,
    Seq,
    Transform,
    TransformFactory,
    Unpacked,
    after_each,
    join,
)


@dataclass(frozen=True)
class ReturnedValue:
    """What one ``return`` of a jitted function returns."""

    node: Any
    """The expression returned (the ``return`` value, or a lambda's body)."""
    value: Any


@dataclass(frozen=True)
class SiteResult:
    """What one jitted function returns, and the ``out_shardings`` it declares; or (``eager``)
    one eager operation on a host array (:mod:`.eager`)."""

    function: Any
    """The ``def``/``lambda`` node that is traced (an eager operation's: its node)."""
    returns: tuple
    out_shardings: Any
    """Abstract value of ``out_shardings``: ``NONE`` when absent."""
    host_computations: tuple = ()
    """``(origin, op, node)``: computations on host values before any move back to device."""
    refusals: tuple = ()
    """``(origin, op, node)``: operations JAX >= 0.7.1 refuses, their operands in different memory spaces."""
    eager: EagerOperation | None = None
    """The eager operation this stands for: its result is the one return, ``op (eager)`` the function."""


class Interpreter(StatementRunner, ExpressionEvaluator, ProjectCode, OtherModules, EagerRunner):
    """The static check of one module: its jit sites, what each one returns, and the eager code."""

    def __init__(
        self,
        module: cst.Module | ModuleFacts,
        text: str,
        memos: Sequence[dict] | None = None,
        project: Project | None = None,
        path: str | None = None,
        regime: Regime = Regime.TYPED,
    ) -> None:
        """``module``: parsed, or facts parsed statement by statement as read (:class:`NotCut`:
        one does not parse alone). ``memos``: per top-level statement, what its syntax tells,
        kept for the next check of the document (:meth:`ParsedSource.memos`). ``project``
        resolves the imports of ``path`` (without it, imported names stay names). ``regime``:
        how the JAX version types memory, which decides what eager operations do."""
        self.regime = regime
        self._eager = None
        self._eager_sites = []
        self._traced = 0
        self._silent = 0
        self.refusals: list = []
        self.path = None if path is None else os.path.abspath(path)
        self.project = project
        self.module_scope: StaticScope
        self.lazy: ForeignScope | None = None
        """The module's scope when it is read statement by statement (its parsed ones)."""
        if isinstance(module, ModuleFacts):
            self.module_scope = self.lazy = ForeignScope(self, module, whole_fallback=False)
            self.lazy.module_path = self.path
            self._body: Sequence[Any] = ()
            self._count = len(module.outline.groups)
        else:
            self.module_scope = StaticScope(
                self, list(module.body), None, unknown=mutated_globals(text), module_path=self.path
            )
            self._body = module.body
            self._count = len(module.body)
        self.foreign: dict[str, ForeignScope | None] = {}
        """Modules of the project read so far, by absolute path."""
        self._memos = memos
        self._memo: dict = {}
        """The memo of the top-level statement being searched for jit sites."""
        self._stack: list[Any] = []
        self._budget = MAX_EVALUATIONS
        self._host_compute_depth = 0
        self.host_computations = []
        self._function_scopes: dict[Any, StaticScope] = {}
        self._collectors: dict[Any, BindingCollector] = {}
        self._locals: dict[Any, frozenset] = {}
        self._changes_parameters = {}

    # ------------------------------------------------------------------ jit sites
    def jit_sites(self) -> list[Jitted]:
        return [jitted for sites in self.jit_sites_by_statement().values() for jitted in sites]

    def jit_sites_by_statement(self, indices: Iterable[int] | None = None) -> dict[int, list[Jitted]]:
        """The jit sites of each top-level statement (of those at ``indices``, in file order):
        a site's node is in the statement it was found in, so each is found once."""
        found: dict[int, list[Jitted]] = {}
        for index in range(self._count) if indices is None else indices:
            statement = self._statement(index)
            if self._memos is not None:
                self._memo = self._memos[index]
            sites: dict[Any, Jitted] = {}
            self._discover_statement(statement, self.module_scope, self.module_scope, index, sites)
            found[index] = list(sites.values())
        return found

    @property
    def statement_count(self) -> int:
        """How many top-level statements (groups) the checked module has."""
        return self._count

    def top_statement(self, index: int) -> Any:
        """The libcst node of the ``index``-th top-level statement (parsed now, when read lazily)."""
        return self._statement(index)

    def class_statements(self, node: cst.ClassDef) -> list:
        """The statements of a class's body (its full body where only its header was parsed)."""
        body = self.module_scope.class_body(node)
        return [] if body is None else block_statements(body.body)

    def _statement(self, index: int) -> Any:
        if self.lazy is None:
            return self._body[index]
        chunk = self.lazy.chunk(index)
        if chunk is None:
            raise NotCut(index)
        self._memo = chunk.memo
        return chunk.statements[0]

    def _discover(self, statements: list, scope: StaticScope, closure: StaticScope, sites: dict) -> None:
        """Find decorated jitted ``def``s and ``jax.jit(f, ...)`` calls in ``statements``.

        ``scope`` evaluates decorators and calls; ``closure`` is what a ``def`` here closes
        over (a class body is a scope for decorators but not for the methods' bodies).
        """
        for index, statement in enumerate(statements):
            self._discover_statement(statement, scope, closure, index, sites)

    def _discover_statement(
        self, statement: Any, scope: StaticScope, closure: StaticScope, index: int, sites: dict
    ) -> None:
        here = scope.at(index)
        if isinstance(statement, cst.FunctionDef):
            if statement.decorators:
                value = self.decorate(statement, here, closure)
                if isinstance(value, Jitted):
                    sites[statement] = value
            inner = self.function_scope(statement, closure)
            self._discover(block_statements(statement.body), inner, inner, sites)
        elif isinstance(statement, cst.ClassDef):
            body = block_statements(statement.body)
            class_scope = StaticScope(self, body, scope, is_class=True)
            self._discover(body, class_scope, closure, sites)
        elif isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for call in self._calls(statement):
                self._discover_call(call, here, sites)
        else:
            for header in header_expressions(statement):
                for call in self._calls(header):
                    self._discover_call(call, here, sites)
            for inner in inner_statements(statement):
                self._discover_statement(inner, scope, closure, index, sites)

    def _discover_call(self, call: cst.Call, scope: Any, sites: dict) -> None:
        if not call.args or call.args[0].keyword is not None or call.args[0].star:
            return
        if not isinstance(call.func, (cst.Name, cst.Attribute, cst.Call)):
            return
        self._budget = MAX_EVALUATIONS
        try:
            callee = self.ev(call.func, scope)
            if (isinstance(callee, Ref) and callee.qualname in names.JIT) or isinstance(callee, JitFactory):
                value = self.ev(call, scope)
                if isinstance(value, Jitted):
                    sites[call] = value
        except Unsupported:
            return

    def _calls(self, node: Any) -> tuple[cst.Call, ...]:
        key = ("calls", node)
        calls = self._memo.get(key)
        if calls is None:
            calls = self._memo[key] = tuple(calls_in(node))
        return calls

    def function_scope(self, node: cst.FunctionDef, parent: StaticScope) -> StaticScope:
        scope = self._function_scopes.get(node)
        if scope is None:
            key = ("bindings", node)
            collector = self._memo.get(key)
            if collector is None:
                collector = self._memo[key] = BindingCollector().collect(block_statements(node.body))
            self._collectors[node] = collector
            scope = StaticScope(
                self, block_statements(node.body), parent, params=parameter_names(node.params), collector=collector
            )
            self._function_scopes[node] = scope
        return scope

    def binding_value(self, scope: StaticScope, binding: Binding) -> Any:
        """The value a binding gives its name (called lazily by :class:`StaticScope`)."""
        return self.eager_binding(lambda: self._binding_value(scope, binding))

    def _binding_value(self, scope: StaticScope, binding: Binding) -> Any:
        try:
            if binding.kind == "import":
                return self.imported(binding.qualname, scope.module_path, isinstance(binding.node, cst.Import))
            if binding.kind == "assign":
                return self.ev(binding.node, scope.at(binding.index))
            if binding.kind == "def":
                return self.decorate(binding.node, scope.at(binding.index), scope.closure)
            if binding.kind == "class":
                return self.class_value(binding.node, scope.at(binding.index), scope)
        except Unsupported:
            return UNKNOWN
        return UNKNOWN

    def decorate(self, node: cst.FunctionDef, scope: Any, closure: Any) -> Any:
        if node.asynchronous is not None:
            return UNKNOWN
        value: Any = Function(node, closure)
        for decorator in reversed(node.decorators):
            value = self._apply_decorator(self.ev(decorator.decorator, scope), value, decorator.decorator, scope)
            if value is UNKNOWN:
                break
        return value

    def _apply_decorator(self, decorator: Any, value: Any, node: Any, scope: Any) -> Any:
        if isinstance(decorator, Ref):
            return jax_api.decorated(decorator.qualname, value)
        if isinstance(decorator, JitFactory):
            return Jitted(value, decorator.options)
        if isinstance(decorator, TransformFactory):
            return jax_api.transform_of(decorator.kind, value, decorator.out_memory)
        if isinstance(decorator, (Function, Bound)):
            # A decorator of the project (a wrapper, a registry): what calling it returns.
            try:
                return self.apply(decorator, [value], {}, node, scope)
            except Unsupported:
                return UNKNOWN
        return UNKNOWN

    # ------------------------------------------------------------------ one jit site
    def analyse(self, jitted: Jitted) -> SiteResult | None:
        self._budget = MAX_EVALUATIONS
        return self.trace_site(jitted, None)[0]

    def trace_site(self, jitted: Jitted, called: tuple[list, dict] | None) -> tuple[SiteResult | None, Any]:
        """What a jit site returns, traced from its ``in_shardings`` or (``called``) from the
        arguments eager code passes it; and the value it returns, joined over its returns."""
        target, bound_args, bound_kwargs = jitted.target, (), ()
        while isinstance(target, Jitted) and not target.options.keywords:
            target = target.target  # jit of a jitted function: the outer jit's options decide
        transformed = None
        if isinstance(target, (Transform, Differentiated)):
            transformed, target = target, _traced_base(target)
        if isinstance(target, Bound):
            target, bound_args, bound_kwargs = target.fn, target.args, target.kwargs
        if not isinstance(target, Function) or target.node in self._stack:
            return None, UNKNOWN
        self.host_computations = []
        self.refusals = []
        options = jitted.options
        try:
            out_shardings = self._option(options, "out_shardings", "out_axis_resources")
            frame = Frame(self.local_names(target.node), target.scope)
            declared = options.get("in_shardings", "in_axis_resources") is not None
            if called is None or declared or transformed is not None:
                frame.env.update(self._site_arguments(target.node, options, bound_args, dict(bound_kwargs)))
            else:
                env = self._bind(
                    Function(target.node, target.scope), [*bound_args, *called[0]], {**dict(bound_kwargs), **called[1]}
                )
                if env is None:
                    return None, UNKNOWN
                frame.env.update(env)
            self._stack.append(target.node if transformed is None else transformed)  # traced by the transform
            try:
                returns: tuple[ReturnedValue, ...]
                if transformed is not None:
                    returns = (ReturnedValue(target.node, self._call_transformed(transformed, target, frame)),)
                elif isinstance(target.node, cst.Lambda):
                    returns = (ReturnedValue(target.node.body, self.ev(target.node.body, frame)),)
                else:
                    collected: list = []
                    self.exec_block(block_statements(target.node.body), frame, collected)
                    returns = tuple(
                        ReturnedValue(node.value, value) for node, value in collected if node.value is not None
                    )
                if target.wrapper is not None:  # a custom_jvp/custom_vjp function jitted itself
                    returns = tuple(
                        ReturnedValue(r.node, after_each(r.value, "compute", target.wrapper, target.node))
                        for r in returns
                    )
            finally:
                self._stack.pop()
        except Unsupported:
            return None, UNKNOWN
        site = SiteResult(target.node, returns, out_shardings, tuple(self.host_computations), tuple(self.refusals))
        value = functools.reduce(join, [r.value for r in returns]) if returns else UNKNOWN
        return site, value

    def _call_transformed(self, transformed: Any, base: Function, frame: Frame) -> Any:
        """``jax.jit(jax.grad(f))`` and the like: ``f``'s parameters take the site's arguments
        (those a ``functools.partial`` under the transform binds are its own), and the
        transform is called on them, as JAX traces it."""
        inner = transformed
        while isinstance(inner, (Transform, Differentiated)):
            inner = inner.fn
        bound = inner if isinstance(inner, Bound) else Bound(base, (), ())
        params = base.node.params
        positional = [p.name.value for p in (*params.posonly_params, *params.params)][len(bound.args) :]
        keyword = dict(bound.kwargs)
        args = [frame.env[name] for name in positional if name not in keyword]
        kwargs = {p.name.value: frame.env[p.name.value] for p in params.kwonly_params if p.name.value not in keyword}
        return self.apply(transformed, args, kwargs, base.node, frame)

    def _option(self, options: JitOptions, *keywords: str) -> Any:
        found = options.get(*keywords)
        return NONE if found is None else jax_api.option_value(self, found)

    def _site_arguments(self, node: Any, options: JitOptions, bound_args: tuple, bound_kwargs: dict) -> dict:
        """Abstract arguments of a traced function: device, host per ``in_shardings``, or unknown."""
        params = node.params
        positional_params = [*params.posonly_params, *params.params]
        positional = [p.name.value for p in positional_params]
        env: dict[str, Any] = {}
        static = self._static_arguments(options, positional)
        found = options.get("in_shardings", "in_axis_resources")
        if found is None:
            in_tree = NONE
        elif isinstance(found[0], Unpacked):  # from ``**options``: spelled at that argument
            in_tree = jax_api.with_spelling(found[0].value, options.argument("in_shardings", "in_axis_resources"))
        else:
            in_tree = self._sharding_tree(*found)
        written = options.argument("in_shardings", "in_axis_resources")
        dynamic = [
            param
            for i, param in enumerate(positional_params)
            if i >= len(bound_args)
            and param.name.value not in bound_kwargs
            and static is not None
            and i not in static
            and param.name.value not in static
        ]
        required = sum(1 for param in dynamic if param.default is None)
        for i, name in enumerate(positional):
            param = positional_params[i]
            if i < len(bound_args):
                env[name] = bound_args[i]
            elif name in bound_kwargs:
                env[name] = bound_kwargs[name]
            elif param not in dynamic:
                env[name] = UNKNOWN
            else:
                env[name] = self._traced_argument(in_tree, dynamic.index(param), required, len(dynamic), param, written)
        for p in params.kwonly_params:
            name = p.name.value
            env[name] = bound_kwargs.get(name, UNKNOWN if static is None or name in static else DEVICE_TREE)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                env[star.name.value] = UNKNOWN
        return env

    def _static_arguments(self, options: JitOptions, positional: list[str]) -> set | None:
        """Indices and names of static arguments; None when they cannot be read."""
        static: set = set()
        for keyword in ("static_argnums", "static_argnames"):
            found = options.get(keyword)
            if found is None:
                continue
            value = jax_api.option_value(self, found)
            items = value.items if isinstance(value, Seq) else (value,)
            for item in items:
                if not isinstance(item, Const) or isinstance(item.value, bool):
                    return None
                entry = item.value
                if isinstance(entry, int) and entry < 0:
                    entry += len(positional)
                static.add(entry)
                if isinstance(entry, int) and 0 <= entry < len(positional):
                    static.add(positional[entry])
                elif isinstance(entry, str) and entry in positional:
                    static.add(positional.index(entry))
        return static

    def _traced_argument(
        self, in_tree: Any, position: int, required: int, count: int, param: cst.Param, written: Any
    ) -> Any:
        """One positional parameter: ``in_shardings`` covers the arguments actually passed, so
        a parameter with a default that it does not clearly cover may be a Python constant."""
        if in_tree is NONE:
            return DEVICE_TREE
        if isinstance(in_tree, Seq):
            if not required <= len(in_tree.items) <= count or position >= len(in_tree.items):
                return UNKNOWN
            in_tree = in_tree.items[position]
        elif isinstance(in_tree, Mapping) or param.default is not None:
            return UNKNOWN
        return argument_from_shardings(in_tree, param.name.value, (), written)

    def _sharding_tree(self, node: Any, scope: Any) -> Any:
        """Evaluate ``in_shardings`` keeping, for each leaf, the literal element that spells it."""
        if isinstance(node, (cst.Tuple, cst.List)) and all(isinstance(e, cst.Element) for e in node.elements):
            return Seq(tuple(self._sharding_tree(e.value, scope) for e in node.elements), isinstance(node, cst.List))
        if isinstance(node, cst.Dict) and all(isinstance(e, cst.DictElement) for e in node.elements):
            items = []
            for element in cast(Sequence[cst.DictElement], node.elements):
                key = self.ev(element.key, scope)
                if not isinstance(key, Const):
                    return UNKNOWN
                items.append((key.value, self._sharding_tree(element.value, scope)))
            return Mapping(tuple(items))
        return with_spelling(self.ev(node, scope), node)

    def local_names(self, node: Any) -> frozenset:
        cached = self._locals.get(node)
        if cached is None:
            names_here = set(parameter_names(node.params))
            if isinstance(node, cst.FunctionDef):
                collector = self._collectors.get(node)
                if collector is None:
                    collector = BindingCollector().collect(block_statements(node.body))
                names_here.update(collector.bindings)
                names_here.update(collector.declared)
            cached = frozenset(names_here)
            self._locals[node] = cached
        return cached


def _traced_base(value: Any) -> Any:
    """The function a chain of transforms (``grad``, ``vmap``, ``checkpoint``...) traces."""
    while isinstance(value, (Transform, Differentiated)):
        value = value.fn
    return value
