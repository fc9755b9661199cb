"""An abstract interpreter over libcst trees for the code JAX would trace under ``jax.jit``.

It follows values from moves to host (``device_put`` to a host sharding, host
``in_shardings``) through assignments, unpacking, pytree literals, operators, array methods,
``jnp``/``lax`` calls, ``lax.scan``/``cond``/``while_loop`` bodies, helper functions of the same
file and nested jitted helpers, up to the ``return`` statements of each jitted function. It
never imports or runs the analysed code. Whatever it does not model yields ``UNKNOWN``.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import libcst as cst

from offload_fixer.model import DEVICE, PINNED_HOST, format_output_path
from offload_fixer.source.bindings import (
    Binding,
    BindingCollector,
    block_statements,
    inner_statements,
    parameter_names,
    target_names,
)

from . import names
from .project import Project, is_modeled
from .scopes import ForeignScope, Frame, StaticScope
from .values import (
    DEVICE_LEAF,
    DEVICE_TREE,
    NONE,
    UNKNOWN,
    AtIndexed,
    AtIndexer,
    Bound,
    Const,
    DataclassType,
    DeviceArray,
    DeviceList,
    DeviceRef,
    Differentiated,
    Function,
    HostArray,
    HostOrigin,
    Instance,
    JitFactory,
    JitOptions,
    Jitted,
    Mapping,
    Optimizer,
    ProjectModule,
    Ref,
    Seq,
    ShardingSpec,
    Transform,
    TransformFactory,
    is_single_array,
    join,
    join_branches,
    leaves,
    map_leaves,
)

MAX_CALL_DEPTH = 8
MAX_EVALUATIONS = 200_000
"""Per jit site; a pathological file ends that site's analysis instead of the run."""

_ABSENT = object()
_STATIC = Const(None)
"""A Python value computed at trace time (a shape, a product of constants): never an array."""
_HOST_COMPUTE_CONTEXT = Const("compute_on")
_GLOBAL_STATEMENT = re.compile(r"^[ \t]*global[ \t]+([\w \t,]+)", re.MULTILINE)
_OPERATOR_NAMES = {
    "Add": "add", "Subtract": "subtract", "Multiply": "multiply", "Divide": "divide",
    "FloorDivide": "floor_divide", "Modulo": "remainder", "Power": "power",
    "MatrixMultiply": "matmul", "BitAnd": "and", "BitOr": "or", "BitXor": "xor",
    "LeftShift": "shift_left", "RightShift": "shift_right", "Minus": "negate", "Plus": "plus",
    "BitInvert": "not",
}
_PYTHON_COMPARISONS = (cst.Is, cst.IsNot, cst.In, cst.NotIn)


class Unsupported(Exception):
    """The function does something the check does not model (generators, await, budget)."""


@dataclass(frozen=True)
class ReturnedValue:
    """What one ``return`` of a jitted function returns."""

    node: Any
    """The expression returned (the ``return`` value, or a lambda's body)."""
    value: Any


@dataclass(frozen=True)
class SiteResult:
    """What one jitted function returns, and the ``out_shardings`` it declares."""

    function: Any
    """The ``def``/``lambda`` node that is traced."""
    returns: tuple
    out_shardings: Any
    """Abstract value of ``out_shardings``: ``NONE`` when absent."""


class Interpreter:
    def __init__(self, module: cst.Module, text: str, memos: Sequence[dict] | None = None,
                 project: Project | None = None, path: str | None = None) -> None:
        """``memos``: one dict per top-level statement that outlives this interpreter (a cached
        chunk's, :meth:`ParsedSource.memos`), where what the statement's syntax alone tells (the
        calls in each simple statement, the names each function binds) is kept for the next
        check of the document. ``project`` resolves the imports of ``path`` to the other
        modules of the project (without it, imported names stay names)."""
        mutated_globals = frozenset(
            name.strip() for match in _GLOBAL_STATEMENT.findall(text) for name in match.split(",")
        )
        self.path = None if path is None else os.path.abspath(path)
        self.project = project
        self.module_scope = StaticScope(self, list(module.body), None, unknown=mutated_globals,
                                        module_path=self.path)
        self.foreign: dict[str, ForeignScope | None] = {}
        """Modules of the project read so far, by absolute path."""
        self.module = module
        self._memos = memos
        self._memo: dict = {}
        """The memo of the top-level statement being searched for jit sites."""
        self._stack: list[Any] = []
        self._budget = MAX_EVALUATIONS
        self._host_compute_depth = 0
        self._function_scopes: dict[Any, StaticScope] = {}
        self._collectors: dict[Any, BindingCollector] = {}
        self._locals: dict[Any, frozenset] = {}

    # ------------------------------------------------------------------ jit sites
    def jit_sites(self) -> list[Jitted]:
        sites: dict[Any, Jitted] = {}
        for index, statement in enumerate(self.module.body):
            if self._memos is not None:
                self._memo = self._memos[index]
            self._discover_statement(statement, self.module_scope, self.module_scope, index, sites)
        return list(sites.values())

    def _discover(self, statements: list, scope: StaticScope, closure: StaticScope, sites: dict) -> None:
        """Find decorated jitted ``def``s and ``jax.jit(f, ...)`` calls in ``statements``.

        ``scope`` evaluates decorators and calls; ``closure`` is what a ``def`` here closes
        over (a class body is a scope for decorators but not for the methods' bodies).
        """
        for index, statement in enumerate(statements):
            self._discover_statement(statement, scope, closure, index, sites)

    def _discover_statement(self, statement: Any, scope: StaticScope, closure: StaticScope,
                            index: int, sites: dict) -> None:
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
            for header in _header_expressions(statement):
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
            if isinstance(callee, Ref) and callee.qualname in names.JIT or isinstance(callee, JitFactory):
                value = self.ev(call, scope)
                if isinstance(value, Jitted):
                    sites[call] = value
        except Unsupported:
            return

    def _calls(self, node: Any) -> tuple[cst.Call, ...]:
        key = ("calls", node)
        calls = self._memo.get(key)
        if calls is None:
            calls = self._memo[key] = tuple(_calls_in(node))
        return calls

    def function_scope(self, node: cst.FunctionDef, parent: StaticScope) -> StaticScope:
        scope = self._function_scopes.get(node)
        if scope is None:
            key = ("bindings", node)
            collector = self._memo.get(key)
            if collector is None:
                collector = self._memo[key] = BindingCollector().collect(block_statements(node.body))
            self._collectors[node] = collector
            scope = StaticScope(self, block_statements(node.body), parent,
                                params=parameter_names(node.params), collector=collector)
            self._function_scopes[node] = scope
        return scope

    def binding_value(self, scope: StaticScope, binding: Binding) -> Any:
        """The value a binding gives its name (called lazily by :class:`StaticScope`)."""
        try:
            if binding.kind == "import":
                return self.imported(binding.qualname, scope.module_path)
            if binding.kind == "assign":
                return self.ev(binding.node, scope.at(binding.index))
            if binding.kind == "def":
                return self.decorate(binding.node, scope.at(binding.index), scope.closure)
            if binding.kind == "class":
                return self._class_value(binding.node, scope.at(binding.index), scope)
        except Unsupported:
            return UNKNOWN
        return UNKNOWN

    # ------------------------------------------------------------------ other modules
    def imported(self, qualname: str, importer: str | None) -> Any:
        """What an import binds: a module of the project (or a name it defines), else a
        name the check knows by its qualified name. ``..pkg.name`` is relative."""
        level = len(qualname) - len(qualname.lstrip("."))
        if not level and (self.project is None or importer is None or is_modeled(qualname)):
            return Ref(qualname)
        if self.project is None or importer is None:
            return UNKNOWN
        parts = [p for p in qualname[level:].split(".") if p]
        if level:
            base = self.project.relative_base(importer, level)
            if base is None:
                return UNKNOWN
            value: Any = ProjectModule(self.project.package_at(base))
        else:
            head = self.project.module_path(parts[:1], self.project.search_roots(importer))
            if head is None:
                return Ref(qualname)
            value, parts = ProjectModule(head), parts[1:]
        for part in parts:
            value = self.module_attribute(value, part)
        return value

    def module_attribute(self, module: Any, name: str) -> Any:
        """``module.name``: what the module binds, else its submodule ``name``."""
        if not isinstance(module, ProjectModule):
            return UNKNOWN
        if module.path == self.path:
            return self.module_scope.lookup(name)
        scope = self.foreign_scope(module.path)
        if scope is not None and scope.binds(name):
            return scope.lookup(name)
        submodule = self.project.submodule(module.path, name)
        if submodule is not None:
            return ProjectModule(submodule)
        return UNKNOWN

    def foreign_scope(self, path: str) -> ForeignScope | None:
        if path not in self.foreign:
            facts = self.project.facts(path) if os.path.isfile(path) else None
            self.foreign[path] = None if facts is None else ForeignScope(self, facts)
        return self.foreign[path]

    def decorate(self, node: cst.FunctionDef, scope: Any, closure: Any) -> Any:
        if node.asynchronous is not None:
            return UNKNOWN
        value: Any = Function(node, closure)
        for decorator in reversed(node.decorators):
            value = self._apply_decorator(self.ev(decorator.decorator, scope), value)
            if value is UNKNOWN:
                break
        return value

    def _class_value(self, node: cst.ClassDef, scope: Any, closure: StaticScope) -> Any:
        """A ``@dataclass`` (a configuration object): its fields and their defaults, so that
        ``Config().offload`` is the default the program runs with. Any other class is unknown."""
        decorators = [self.ev(d.decorator, scope) for d in node.decorators]
        if len(decorators) != 1:
            return UNKNOWN
        (decorator,) = decorators
        if isinstance(decorator, Ref) and decorator.qualname in names.DATACLASS:
            pass
        elif not (isinstance(node.decorators[0].decorator, cst.Call) and _is_dataclass_call(node.decorators[0].decorator,
                                                                                            scope, self)):
            return UNKNOWN
        body = block_statements(node.body)
        class_scope = StaticScope(self, body, closure, is_class=True)
        fields = []
        for index, statement in enumerate(body):
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    default = UNKNOWN if small.value is None else self._field_default(small.value, class_scope.at(index))
                    fields.append((small.target.value, default))
        return DataclassType(tuple(fields))

    def _field_default(self, node: Any, scope: Any) -> Any:
        if isinstance(node, cst.Call):
            callee = self.ev(node.func, scope)
            if isinstance(callee, Ref) and callee.qualname in names.DATACLASS_FIELD:
                for arg in node.args:
                    if arg.keyword is not None and arg.keyword.value == "default":
                        return self.ev(arg.value, scope)
                return UNKNOWN
        return self.ev(node, scope)

    def _apply_decorator(self, decorator: Any, value: Any) -> Any:
        if isinstance(decorator, Ref):
            qualname = decorator.qualname
            if qualname in names.JIT:
                return Jitted(value, JitOptions())
            if qualname == names.STATICMETHOD:
                return value
            if qualname in names.CUSTOM_JVP:
                return _custom_jvp(value)
            for kind, qualnames in _TRANSFORMS:
                if qualname in qualnames:
                    return Transform(kind, value)
            return UNKNOWN
        if isinstance(decorator, JitFactory):
            return Jitted(value, decorator.options)
        if isinstance(decorator, TransformFactory):
            return _custom_jvp(value) if decorator.kind == "custom_jvp" else Transform(decorator.kind, value)
        return UNKNOWN

    # ------------------------------------------------------------------ one jit site
    def analyse(self, jitted: Jitted) -> SiteResult | None:
        target, bound_args, bound_kwargs = jitted.target, (), ()
        if isinstance(target, Bound):
            target, bound_args, bound_kwargs = target.fn, target.args, target.kwargs
        if not isinstance(target, Function) or target.wrapper is not None:
            return None
        self._budget = MAX_EVALUATIONS
        options = jitted.options
        try:
            out_shardings = self._option(options, "out_shardings", "out_axis_resources")
            frame = Frame(self.local_names(target.node), target.scope)
            frame.env.update(self._site_arguments(target.node, options, bound_args, dict(bound_kwargs)))
            self._stack.append(target.node)
            try:
                if isinstance(target.node, cst.Lambda):
                    returns = (ReturnedValue(target.node.body, self.ev(target.node.body, frame)),)
                else:
                    collected: list = []
                    self.exec_block(block_statements(target.node.body), frame, collected)
                    returns = tuple(ReturnedValue(node.value, value) for node, value in collected
                                    if node.value is not None)
            finally:
                self._stack.pop()
        except Unsupported:
            return None
        return SiteResult(target.node, returns, out_shardings)

    def _option(self, options: JitOptions, *keywords: str) -> Any:
        found = options.get(*keywords)
        return NONE if found is None else self.ev(*found)

    def _site_arguments(self, node: Any, options: JitOptions, bound_args: tuple, bound_kwargs: dict) -> dict:
        """Abstract arguments of a traced function: device, host per ``in_shardings``, or unknown."""
        params = node.params
        positional_params = [*params.posonly_params, *params.params]
        positional = [p.name.value for p in positional_params]
        env: dict[str, Any] = {}
        static = self._static_arguments(options, positional)
        found = options.get("in_shardings", "in_axis_resources")
        in_tree = NONE if found is None else self._sharding_tree(*found)
        written = options.argument("in_shardings", "in_axis_resources")
        dynamic = [
            param for i, param in enumerate(positional_params)
            if i >= len(bound_args) and param.name.value not in bound_kwargs and static is not None
            and i not in static and param.name.value not in static
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
                env[name] = self._traced_argument(in_tree, dynamic.index(param), required, len(dynamic), param,
                                                  written)
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
            value = self.ev(*found)
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

    def _traced_argument(self, in_tree: Any, position: int, required: int, count: int, param: cst.Param,
                         written: Any) -> Any:
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
        return self._argument_from_shardings(in_tree, param.name.value, (), written)

    def _argument_from_shardings(self, tree: Any, name: str, keys: tuple, written: Any) -> Any:
        """The argument's abstract value, following its ``in_shardings`` prefix tree."""
        if isinstance(tree, Seq):
            return Seq(tuple(self._argument_from_shardings(t, name, keys + (("index", i),), written)
                             for i, t in enumerate(tree.items)), tree.is_list)
        if isinstance(tree, Mapping):
            return Mapping(tuple((k, self._argument_from_shardings(t, name, keys + (("key", k),), written))
                                 for k, t in tree.items))
        if tree is NONE:
            return DEVICE_TREE
        if isinstance(tree, ShardingLeaf):
            kind = memory_kind_of(tree.value)
            if kind in names.HOST_KINDS and kind not in names.HOST_MEMORY_SPACE_KINDS:
                return UNKNOWN  # unpinned_host arguments are not host memory to XLA (S(6) on TPU)
            if kind in names.HOST_KINDS:
                label = name + format_output_path(keys)
                origin = HostOrigin("host_argument", kind, written, f"argument {label} declared {kind} (in_shardings)",
                                    argument=label, declared_at=tree.node, condition=_condition_of(tree.value))
                return HostArray(origin, single=False)
            if kind in names.DEVICE_KINDS or kind == "nokind":
                return DEVICE_TREE
        return UNKNOWN

    def _sharding_tree(self, node: Any, scope: Any) -> Any:
        """Evaluate ``in_shardings`` keeping, for each leaf, the literal element that spells it."""
        if isinstance(node, (cst.Tuple, cst.List)) and all(isinstance(e, cst.Element) for e in node.elements):
            return Seq(tuple(self._sharding_tree(e.value, scope) for e in node.elements), isinstance(node, cst.List))
        if isinstance(node, cst.Dict) and all(isinstance(e, cst.DictElement) for e in node.elements):
            items = []
            for element in node.elements:
                key = self.ev(element.key, scope)
                if not isinstance(key, Const):
                    return UNKNOWN
                items.append((key.value, self._sharding_tree(element.value, scope)))
            return Mapping(tuple(items))
        return _attach(self.ev(node, scope), node)

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

    # ------------------------------------------------------------------ statements
    def exec_block(self, statements: list, frame: Frame, returns: list) -> bool:
        """Run statements; True when every path leaves the block (return/raise/break)."""
        for statement in statements:
            if self._exec(statement, frame, returns):
                return True
        return False

    def _exec(self, statement: Any, frame: Frame, returns: list) -> bool:
        if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in statement.body:
                if self._exec_small(small, frame, returns):
                    return True
            return False
        if isinstance(statement, cst.If):
            return self._exec_if(statement, frame, returns)
        if isinstance(statement, (cst.For, cst.While)):
            self._exec_loop(statement, frame, returns)
            return False
        if isinstance(statement, cst.With):
            return self._exec_with(statement, frame, returns)
        if isinstance(statement, cst.FunctionDef):
            frame.env[statement.name.value] = self.decorate(statement, frame, frame)
            return False
        if isinstance(statement, (cst.Try, cst.TryStar)):
            self.exec_block(block_statements(statement.body), frame, returns)
            self._forget(_bound_names([statement]), frame)
            return False
        self._forget(_bound_names([statement]), frame)
        return False

    def _exec_if(self, statement: cst.If, frame: Frame, returns: list) -> bool:
        """A test the check can decide (a constant flag) runs one branch. Otherwise both run
        and their environments meet; a test on a configuration flag (not on the arrays)
        keeps a value that is host on one branch only, with that branch recorded."""
        test = self.ev(statement.test, frame)
        decided = _truth(test)
        if decided is True:
            return self.exec_block(block_statements(statement.body), frame, returns)
        if decided is False:
            return self._exec_else(statement, frame, returns)
        flag = condition_key(statement.test) if self._is_flag(statement.test, test, frame) else None
        before = dict(frame.env)
        frame.env = _masked(before, flag, True)
        body_leaves = self.exec_block(block_statements(statement.body), frame, returns)
        after_body = _unmasked(frame.env, before)
        frame.env = _masked(before, flag, False)
        else_leaves = self._exec_else(statement, frame, returns)
        after_else = _unmasked(frame.env, before)
        if body_leaves and else_leaves:
            return True
        if body_leaves:
            frame.env = after_else
        elif not else_leaves:
            frame.env = _join_env(after_body, after_else, statement.test if flag is not None else None)
        else:
            frame.env = after_body
        return False

    def _exec_else(self, statement: cst.If, frame: Frame, returns: list) -> bool:
        if isinstance(statement.orelse, cst.If):
            return self._exec_if(statement.orelse, frame, returns)
        if statement.orelse is not None:
            return self.exec_block(block_statements(statement.orelse.body), frame, returns)
        return False

    def _is_flag(self, node: Any, test: Any, scope: Any) -> bool:
        """Whether an ``if`` test is a configuration flag: it names no array (a test on the
        values themselves, such as their memory kind, is correlated with what they hold)."""
        if any(isinstance(leaf, (HostArray, DeviceArray)) for leaf in leaves(test)):
            return False
        for name in _names_in(node):
            value = scope.lookup(name)
            if any(isinstance(leaf, (HostArray, DeviceArray, AtIndexer, AtIndexed)) for leaf in leaves(value)):
                return False
        return True

    def _exec_loop(self, statement: Any, frame: Frame, returns: list) -> None:
        """Python loops unroll at trace time: run the body twice from the joined state and keep
        only what every iteration agrees on; ``return``s count from the second pass."""
        body = block_statements(statement.body)
        before = dict(frame.env)
        self._loop_pass(statement, body, frame, [])
        joined = _join_env(before, frame.env)
        frame.env = dict(joined)
        self._loop_pass(statement, body, frame, returns)
        frame.env = _join_env(joined, frame.env)
        if statement.orelse is not None:
            self.exec_block(block_statements(statement.orelse.body), frame, returns)

    def _loop_pass(self, statement: Any, body: list, frame: Frame, returns: list) -> None:
        if isinstance(statement, cst.For):
            iterated = self.ev(statement.iter, frame)
            for name in target_names(statement.target):
                frame.env[name] = UNKNOWN
            if isinstance(statement.target, cst.Name):
                frame.env[statement.target.value] = _element(iterated)
        else:
            self.ev(statement.test, frame)
        self.exec_block(body, frame, returns)

    def _exec_with(self, statement: cst.With, frame: Frame, returns: list) -> bool:
        host_compute = 0
        for item in statement.items:
            if self.ev(item.item, frame) is _HOST_COMPUTE_CONTEXT:
                host_compute += 1
            if item.asname is not None:
                self._forget(target_names(item.asname.name), frame)
        self._host_compute_depth += host_compute
        try:
            return self.exec_block(block_statements(statement.body), frame, returns)
        finally:
            self._host_compute_depth -= host_compute

    def _exec_small(self, small: Any, frame: Frame, returns: list) -> bool:
        if isinstance(small, cst.Assign):
            value = self.ev(small.value, frame)
            for target in small.targets:
                self._assign(target.target, value, frame)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self._assign(small.target, self.ev(small.value, frame), frame)
        elif isinstance(small, cst.AugAssign):
            if isinstance(small.target, cst.Name):
                current = frame.lookup(small.target.value)
                value = self._binary(current, small.operator, self.ev(small.value, frame), small)
                self._assign(small.target, value, frame)
            else:
                self._forget_base(small.target, frame)
        elif isinstance(small, cst.Expr):
            self.ev(small.value, frame)
        elif isinstance(small, cst.Return):
            value = NONE if small.value is None else self.ev(small.value, frame)
            returns.append((small, value))
            return True
        elif isinstance(small, (cst.Raise, cst.Break, cst.Continue)):
            return True
        elif isinstance(small, (cst.Import, cst.ImportFrom)):
            scope = StaticScope(self, [cst.SimpleStatementLine(body=[small])], None, module_path=frame.module_path)
            for name in scope.bindings:
                frame.env[name] = scope.lookup(name)
        elif isinstance(small, cst.Del):
            self._forget(target_names(small.target), frame)
            if not isinstance(small.target, (cst.Name, cst.Tuple, cst.List)):
                self._forget_base(small.target, frame)
        elif isinstance(small, (cst.Global, cst.Nonlocal)):
            self._forget([item.name.value for item in small.names], frame)
        return False

    def _assign(self, target: Any, value: Any, frame: Frame) -> None:
        if isinstance(target, cst.Name):
            frame.env[target.value] = value
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            starred = [i for i, e in enumerate(elements) if isinstance(e, cst.StarredElement)]
            if isinstance(value, Seq) and not starred and len(value.items) == len(elements):
                for element, item in zip(elements, value.items):
                    self._assign(element.value, item, frame)
            elif isinstance(value, Seq) and len(starred) == 1 and len(value.items) >= len(elements) - 1:
                split, tail = starred[0], len(elements) - starred[0] - 1
                for element, item in zip(elements[:split], value.items[:split]):
                    self._assign(element.value, item, frame)
                rest = value.items[split:len(value.items) - tail]
                self._assign(elements[split].value, Seq(rest, True), frame)
                for element, item in zip(elements[split + 1:], value.items[len(value.items) - tail:]):
                    self._assign(element.value, item, frame)
            else:
                self._forget(target_names(target), frame)
        elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            self._assign_item(target, value, frame)
        else:
            self._forget_base(target, frame)

    def _assign_item(self, target: cst.Subscript, value: Any, frame: Frame) -> None:
        """``d['k'] = v`` on a dict/list literal held by a local name."""
        name = target.value.value
        container = frame.lookup(name)
        key = self._constant_index(target, frame)
        updated: Any = UNKNOWN
        if isinstance(container, Mapping) and key is not None:
            if container.get(key.value) is None:
                updated = Mapping(container.items + ((key.value, value),))
            else:
                updated = Mapping(tuple((k, value if k == key.value else v) for k, v in container.items))
        elif isinstance(container, Seq) and container.is_list and key is not None and isinstance(key.value, int) \
                and -len(container.items) <= key.value < len(container.items):
            items = list(container.items)
            items[key.value] = value
            updated = Seq(tuple(items), True)
        self._forget_aliases(container, frame)
        frame.env[name] = updated

    def _forget(self, names_: Any, frame: Frame) -> None:
        for name in names_:
            frame.env[name] = UNKNOWN

    def _forget_base(self, target: Any, frame: Frame) -> None:
        """An attribute or item of a local object changed in a way not modelled."""
        while isinstance(target, (cst.Attribute, cst.Subscript)):
            target = target.value
        if isinstance(target, cst.Name):
            self._forget_aliases(frame.lookup(target.value), frame)
            frame.env[target.value] = UNKNOWN

    def _forget_aliases(self, container: Any, frame: Frame) -> None:
        if isinstance(container, (Seq, Mapping)):
            for other, value in list(frame.env.items()):
                if value is container:
                    frame.env[other] = UNKNOWN

    # ------------------------------------------------------------------ expressions
    def ev(self, node: Any, scope: Any) -> Any:
        self._budget -= 1
        if self._budget < 0:
            raise Unsupported("evaluation budget exhausted")
        method = _DISPATCH.get(type(node))
        if method is None:
            if isinstance(node, (cst.Yield, cst.Await)):
                raise Unsupported(type(node).__name__)
            return UNKNOWN
        return method(self, node, scope)

    def _ev_name(self, node: cst.Name, scope: Any) -> Any:
        value = node.value
        if value == "None":
            return NONE
        if value in ("True", "False"):
            return Const(value == "True")
        return scope.lookup(value)

    def _ev_literal(self, node: Any, scope: Any) -> Any:
        return Const(_literal_value(node.value))

    def _ev_attribute(self, node: cst.Attribute, scope: Any) -> Any:
        base = self.ev(node.value, scope)
        attr = node.attr.value
        if isinstance(base, Ref):
            return Ref(f"{base.qualname}.{attr}")
        if isinstance(base, ProjectModule):
            return self.module_attribute(base, attr)
        if isinstance(base, Instance):
            found = base.get(attr)
            return UNKNOWN if found is None else found
        if isinstance(base, (HostArray, DeviceArray)):
            if attr in names.ARRAY_ATTRIBUTES:
                return self._compute(attr, (base,), node, f"attribute.{attr}")
            if attr == "at":
                return AtIndexer(base)
            if attr in ("shape", "ndim", "size", "dtype"):
                return _STATIC
            if not base.single and attr not in names.ARRAY_PROPERTIES:
                return base  # a pytree node's field (``state.params``): a subtree in the same memory
        return UNKNOWN

    def _ev_subscript(self, node: cst.Subscript, scope: Any) -> Any:
        base = self.ev(node.value, scope)
        if isinstance(base, DeviceList):
            return DeviceRef()
        if isinstance(base, (Seq, Mapping)):
            key = self._constant_index(node, scope)
            if key is None:
                return UNKNOWN
            if isinstance(base, Mapping):
                item = base.get(key.value)
                return UNKNOWN if item is None else item
            if isinstance(key.value, int) and not isinstance(key.value, bool) \
                    and -len(base.items) <= key.value < len(base.items):
                return base.items[key.value]
            return UNKNOWN
        if isinstance(base, (HostArray, DeviceArray)) and not base.single:
            key = self._constant_index(node, scope)
            if key is not None and isinstance(key.value, str):
                return base  # a subtree of a pytree whose leaves are all in one memory
        if isinstance(base, (HostArray, DeviceArray, AtIndexer)):
            operands = tuple(self.ev(part, scope) for part in _index_parts(node))
            if isinstance(base, AtIndexer):
                return AtIndexed(base.base, operands)
            trivial = all(_whole_axis(element.slice) for element in node.slice)
            return self._compute("index", (base, *operands), node, "maybe_identity" if trivial else "compute")
        return UNKNOWN

    def _constant_index(self, node: cst.Subscript, scope: Any) -> Const | None:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return None
        key = self.ev(node.slice[0].slice.value, scope)
        return key if isinstance(key, Const) and isinstance(key.value, (int, str)) else None

    def _ev_tuple(self, node: Any, scope: Any) -> Any:
        items: list = []
        for element in node.elements:
            value = self.ev(element.value, scope)
            if isinstance(element, cst.StarredElement):
                if not isinstance(value, Seq):
                    return UNKNOWN
                items.extend(value.items)
            else:
                items.append(value)
        return Seq(tuple(items), isinstance(node, cst.List))

    def _ev_dict(self, node: cst.Dict, scope: Any) -> Any:
        items: list = []
        for element in node.elements:
            if isinstance(element, cst.StarredDictElement):
                value = self.ev(element.value, scope)
                if not isinstance(value, Mapping):
                    return UNKNOWN
                items.extend(value.items)
                continue
            key = self.ev(element.key, scope)
            if not isinstance(key, Const):
                return UNKNOWN
            items = [(k, v) for k, v in items if k != key.value]
            items.append((key.value, self.ev(element.value, scope)))
        return Mapping(tuple(items))

    def _ev_binary(self, node: cst.BinaryOperation, scope: Any) -> Any:
        return self._binary(self.ev(node.left, scope), node.operator, self.ev(node.right, scope), node)

    def _binary(self, left: Any, operator: Any, right: Any, node: Any) -> Any:
        if isinstance(left, Seq) and isinstance(right, Seq) and isinstance(operator, (cst.Add, cst.AddAssign)):
            return Seq(left.items + right.items, left.is_list)
        if isinstance(left, (Seq, Mapping)) or isinstance(right, (Seq, Mapping)):
            return UNKNOWN
        if isinstance(left, Const) and isinstance(right, Const):
            return _STATIC
        name = type(operator).__name__.replace("Assign", "")
        return self._compute(_OPERATOR_NAMES.get(name, name.lower()), (left, right), node)

    def _ev_unary(self, node: cst.UnaryOperation, scope: Any) -> Any:
        operand = self.ev(node.expression, scope)
        if isinstance(node.operator, cst.Not):
            return UNKNOWN
        number = isinstance(operand, Const) and type(operand.value) in (int, float)
        if number:
            if isinstance(node.operator, cst.Minus):
                return Const(-operand.value)
            if isinstance(node.operator, cst.Plus):
                return operand
        name = _OPERATOR_NAMES.get(type(node.operator).__name__, type(node.operator).__name__.lower())
        return self._compute(name, (operand,), node, f"operator.{name}")

    def _ev_comparison(self, node: cst.Comparison, scope: Any) -> Any:
        operands = [self.ev(node.left, scope)]
        for comparison in node.comparisons:
            if isinstance(comparison.operator, _PYTHON_COMPARISONS):
                return UNKNOWN
            operands.append(self.ev(comparison.comparator, scope))
        return self._compute("compare", tuple(operands), node)

    def _ev_if_exp(self, node: cst.IfExp, scope: Any) -> Any:
        test = self.ev(node.test, scope)
        decided = _truth(test)
        if decided is not None:
            return self.ev(node.body if decided else node.orelse, scope)
        body, orelse = self.ev(node.body, scope), self.ev(node.orelse, scope)
        if self._is_flag(node.test, test, scope) and not _conditional(body) and not _conditional(orelse):
            return join_branches(body, orelse, node.test)
        return join(body, orelse)

    def _ev_lambda(self, node: cst.Lambda, scope: Any) -> Any:
        return Function(node, scope)

    def _ev_named_expr(self, node: cst.NamedExpr, scope: Any) -> Any:
        value = self.ev(node.value, scope)
        if isinstance(scope, Frame) and isinstance(node.target, cst.Name):
            scope.env[node.target.value] = value
        return value

    def _ev_boolean(self, node: cst.BooleanOperation, scope: Any) -> Any:
        self.ev(node.left, scope)
        self.ev(node.right, scope)
        return UNKNOWN

    # ------------------------------------------------------------------ calls
    def _ev_call(self, node: cst.Call, scope: Any) -> Any:
        func = node.func
        receiver = None
        if isinstance(func, cst.Attribute):
            receiver = self.ev(func.value, scope)
            if isinstance(receiver, Ref):
                callee = Ref(f"{receiver.qualname}.{func.attr.value}")
            elif isinstance(receiver, ProjectModule):
                callee = self.module_attribute(receiver, func.attr.value)
            else:
                callee = None
        else:
            callee = self.ev(func, scope)
        arguments = self._arguments(node, scope)
        if arguments is None:
            result = UNKNOWN
        elif callee is None:
            result = self._method(receiver, func.attr.value, *arguments, node, func.value, scope)
        else:
            result = self.apply(callee, *arguments, node, scope)
        if isinstance(scope, Frame) and _may_mutate(callee):
            for arg in node.args:
                if isinstance(arg.value, cst.Name):
                    value = scope.env.get(arg.value.value)
                    if isinstance(value, Mapping) or isinstance(value, Seq) and value.is_list:
                        self._forget_aliases(value, scope)
        return result

    def _arguments(self, node: cst.Call, scope: Any) -> tuple[list, dict] | None:
        args: list = []
        kwargs: dict = {}
        for arg in node.args:
            value = self.ev(arg.value, scope)
            if arg.star == "*":
                if not isinstance(value, Seq):
                    return None
                args.extend(value.items)
            elif arg.star == "**":
                if not isinstance(value, Mapping) or not all(isinstance(k, str) for k, _ in value.items):
                    return None
                kwargs.update(value.items)
            elif arg.keyword is not None:
                kwargs[arg.keyword.value] = value
            else:
                args.append(value)
        return args, kwargs

    def apply(self, callee: Any, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        if isinstance(callee, Ref):
            return self._apply_ref(callee.qualname, args, kwargs, node, scope)
        if isinstance(callee, Function):
            return self._inline(callee, args, kwargs, node)
        if isinstance(callee, Bound):
            merged = dict(callee.kwargs)
            merged.update(kwargs)
            return self.apply(callee.fn, [*callee.args, *args], merged, node, scope)
        if isinstance(callee, Jitted):
            return self._nested_jit(callee, args, kwargs, node, scope)
        if isinstance(callee, JitFactory):
            if args:
                return Jitted(args[0], callee.options.merged(_keywords(node, scope)))
            return JitFactory(callee.options.merged(_keywords(node, scope)))
        if isinstance(callee, Transform):
            return self._transformed(callee, args, kwargs, node, scope)
        if isinstance(callee, Differentiated):
            return self._differentiated(callee, args, kwargs, node, scope)
        if isinstance(callee, DataclassType):
            return _instantiate(callee.fields, args, kwargs)
        if isinstance(callee, TransformFactory) and args:
            if callee.kind == "custom_jvp":
                return _custom_jvp(args[0])
            return Transform(callee.kind, args[0])
        return UNKNOWN

    def _apply_ref(self, qualname: str, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        if qualname in names.JIT:
            if args:
                return Jitted(args[0], _keywords(node, scope, _JIT_POSITIONAL))
            return JitFactory(_keywords(node, scope))
        if qualname in names.PARTIAL and args:
            return self._partial(args[0], args[1:], kwargs, node, scope)
        if qualname in names.DEVICE_PUT:
            x = args[0] if args else kwargs.get("x", _ABSENT)
            target = args[1] if len(args) > 1 else kwargs.get("device", _ABSENT)
            return UNKNOWN if x is _ABSENT else self._put(x, target, node)
        if qualname in names.SHARDING_CLASSES:
            kind = kwargs.get("memory_kind", NONE)
            if kind is NONE:
                return ShardingSpec(None)
            return ShardingSpec(kind.value) if isinstance(kind, Const) and isinstance(kind.value, str) else UNKNOWN
        if names.is_transfer_to_memory_kind(qualname):
            kind = args[0] if args else kwargs.get("memory_kind")
            return ShardingSpec(kind.value) if isinstance(kind, Const) and isinstance(kind.value, str) else UNKNOWN
        if qualname in names.DEVICE_LISTS:
            return UNKNOWN if args or kwargs else DeviceList()
        if qualname in names.COMPUTE_ON:
            device_host = args and isinstance(args[0], Const) and args[0].value == "device_host"
            return _HOST_COMPUTE_CONTEXT if device_host else UNKNOWN
        if qualname in names.CUSTOM_JVP:
            return _custom_jvp(args[0]) if args else UNKNOWN
        for kind, qualnames in _TRANSFORMS:
            if qualname in qualnames:
                return Transform(kind, args[0]) if args else TransformFactory(kind)
        library = self._library_call(qualname, args, kwargs, node)
        if library is not _ABSENT:
            return library
        if qualname in names.DATACLASS_REPLACE and len(args) == 1 and isinstance(args[0], Instance):
            return _instantiate(args[0].fields, [], kwargs)
        if (qualname in names.GRAD or qualname in names.VALUE_AND_GRAD) and args:
            return _differentiation(qualname in names.VALUE_AND_GRAD, args, kwargs)
        if qualname in names.TREE_MAP and len(args) >= 2 and not kwargs:
            return self._tree_map(args[0], args[1], args[2:], node, scope)
        control = _CONTROL_FLOW.get(qualname)
        if control is not None:
            return control(self, args, kwargs, node, scope)
        if qualname in names.PYTREE_PRESERVING and args:
            return _after_each(args[0], "compute", names.PYTREE_PRESERVING[qualname], node)
        if qualname in names.COPIES and len(args) == 1 and set(kwargs) <= {"copy"}:
            return _after_each(args[0], "copy", "copy", node)
        if qualname in names.COMPUTE_FUNCTIONS:
            if names.MULTI_RESULT_WHEN.get(qualname) in kwargs:
                return UNKNOWN
            if qualname in names.SINGLE_POSITIONAL_ONLY and len(args) != 3:
                return UNKNOWN
            arrays = [a for a in args if not isinstance(a, Const)]
            one_operand = len(arrays) == 1 and (not isinstance(arrays[0], Seq) or len(arrays[0].items) == 1)
            kind = "maybe_identity" if one_operand and qualname in names.SINGLE_OPERAND_IDENTITY else qualname
            return self._compute(qualname.rsplit(".", 1)[1], (*args, *kwargs.values()), node, kind)
        if qualname in ("builtins.tuple", "builtins.list") and len(args) == 1 and isinstance(args[0], Seq):
            return Seq(args[0].items, qualname == "builtins.list")
        if qualname == "builtins.dict" and not args:
            return Mapping(tuple(kwargs.items()))
        return UNKNOWN

    def _library_call(self, qualname: str, args: list, kwargs: dict, node: Any) -> Any:
        """optax and flax.nnx calls that keep a pytree's structure; ``_ABSENT`` for others."""
        if qualname in names.OPTAX_WITH_STATE:
            return Optimizer(True)
        if qualname == names.OPTAX_SGD:
            momentum = args[1] if len(args) > 1 else kwargs.get("momentum", NONE)
            if momentum is NONE:
                return Optimizer(False)
            return Optimizer(True) if isinstance(momentum, Const) and momentum is not _STATIC else Optimizer(None)
        if qualname == names.OPTAX_CHAIN:
            known = [a.stateful if isinstance(a, Optimizer) else None for a in args]
            return Optimizer(True if True in known else (None if None in known else False))
        if qualname == names.OPTAX_APPLY_UPDATES and len(args) == 2 and not kwargs:
            return self._leafwise_pair(args[0], args[1], "apply_updates", node)
        if qualname in names.NNX_SPLIT or qualname in names.NNX_STATE:
            if not args or not _uniform(args[0]):
                return UNKNOWN
            states = max(len(args) - 1, 1)
            if qualname in names.NNX_STATE:
                return args[0] if states == 1 else Seq((args[0],) * states)
            return Seq((UNKNOWN, *(args[0],) * states))
        if qualname in names.NNX_MERGE and len(args) >= 2:
            states = args[1:]
            return states[0] if all(_uniform(s) and s == states[0] for s in states) else UNKNOWN
        return _ABSENT

    def _optimizer_method(self, optimizer: Optimizer, name: str, args: list, kwargs: dict, node: Any) -> Any:
        """``tx.update(grads, state, params)`` -> ``(updates, new_state)``: updates computed
        from the gradients and, for an optimizer with moments, from its state; ``tx.init``."""
        if name == "init" and len(args) == 1:
            return map_leaves(args[0], lambda leaf: DeviceArray(is_single_array(leaf))
                              if isinstance(leaf, DeviceArray) else UNKNOWN)
        if name != "update" or not 2 <= len(args) <= 3 or kwargs:
            return UNKNOWN
        grads, state = args[0], args[1]
        reads_state = optimizer.stateful
        if reads_state is None:
            if any(isinstance(leaf, HostArray) for leaf in leaves(state)):
                return UNKNOWN
            reads_state = True
        operands = (state,) if reads_state else ()
        updates = _map_keeping_structure(grads, lambda g: self._compute("optax update", (g, *operands), node))
        new_state = _map_keeping_structure(state, lambda s: self._compute("optax update", (s, grads), node)) \
            if reads_state else state
        return Seq((updates, new_state))

    def _leafwise_pair(self, tree: Any, other: Any, op: str, node: Any) -> Any:
        """An elementwise function of two pytrees of the same structure (``apply_updates``)."""
        if isinstance(tree, Seq) and isinstance(other, Seq) and len(tree.items) == len(other.items):
            return Seq(tuple(self._leafwise_pair(a, b, op, node) for a, b in zip(tree.items, other.items)), tree.is_list)
        if isinstance(tree, Mapping) and isinstance(other, Mapping) and \
                [k for k, _ in tree.items] == [k for k, _ in other.items]:
            return Mapping(tuple((k, self._leafwise_pair(a, b, op, node))
                                 for (k, a), (_, b) in zip(tree.items, other.items)))
        return _map_keeping_structure(tree, lambda leaf: self._compute(op, (leaf, other), node))

    def _partial(self, head: Any, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        if isinstance(head, Ref):
            if head.qualname in names.JIT:
                return JitFactory(_keywords(node, scope))
            if head.qualname in names.CUSTOM_JVP:
                return TransformFactory("custom_jvp")
            for kind, qualnames in _TRANSFORMS:
                if head.qualname in qualnames:
                    return TransformFactory(kind)
            return UNKNOWN
        if isinstance(head, (Function, Bound)):
            return Bound(head, tuple(args), tuple(kwargs.items()))
        return UNKNOWN

    def _method(self, receiver: Any, name: str, args: list, kwargs: dict, node: Any,
                receiver_node: Any, scope: Any) -> Any:
        if isinstance(receiver, Optimizer):
            return self._optimizer_method(receiver, name, args, kwargs, node)
        if name == "with_memory_kind":
            kind = args[0] if args else kwargs.get("kind")
            return ShardingSpec(kind.value) if isinstance(kind, Const) and isinstance(kind.value, str) else UNKNOWN
        if isinstance(receiver, (HostArray, DeviceArray)):
            if name in names.ARRAY_METHODS:
                return self._compute(name, (receiver, *args, *kwargs.values()), node, f"method.{name}")
            if name == "copy" and not args:
                return receiver.after("copy", "copy", node) if isinstance(receiver, HostArray) else receiver
            return UNKNOWN
        if isinstance(receiver, AtIndexed) and name in names.AT_METHODS:
            return self._compute(f"at[].{name}", (receiver.base, *receiver.operands, *args, *kwargs.values()), node)
        if isinstance(receiver, Mapping) and name == "get" and args and isinstance(args[0], Const):
            item = receiver.get(args[0].value)
            return item if item is not None else (args[1] if len(args) > 1 else NONE)
        if isinstance(receiver, (Mapping, Seq)) and name in names.MUTATING_METHODS and isinstance(scope, Frame):
            self._forget_base(receiver_node, scope)
        return UNKNOWN

    def _inline(self, fn: Function, args: list, kwargs: dict, node: Any) -> Any:
        """Trace a helper of the same file: Python calls are inlined by JAX tracing."""
        if fn.node in self._stack or len(self._stack) >= MAX_CALL_DEPTH:
            return UNKNOWN
        if isinstance(fn.node, cst.FunctionDef) and fn.node.asynchronous is not None:
            return UNKNOWN
        env = self._bind(fn, args, kwargs)
        if env is None:
            return UNKNOWN
        frame = Frame(self.local_names(fn.node), fn.scope)
        frame.env.update(env)
        self._stack.append(fn.node)
        try:
            if isinstance(fn.node, cst.Lambda):
                result = self.ev(fn.node.body, frame)
            else:
                collected: list = []
                leaves_always = self.exec_block(block_statements(fn.node.body), frame, collected)
                results = [value for _, value in collected]
                if not leaves_always:
                    results.append(NONE)
                result = functools.reduce(join, results)
        except Unsupported:
            if self._budget < 0:
                raise
            result = UNKNOWN
        finally:
            self._stack.pop()
        if fn.wrapper == "custom_jvp":
            result = _after_each(result, "compute", "custom_jvp", node)
        return result

    def _bind(self, fn: Function, args: list, kwargs: dict) -> dict | None:
        params = fn.node.params
        positional = [*params.posonly_params, *params.params]
        env: dict[str, Any] = {}
        for param, value in zip(positional, args):
            env[param.name.value] = value
        extra = args[len(positional):]
        if isinstance(params.star_arg, cst.Param):
            env[params.star_arg.name.value] = Seq(tuple(extra))
        elif extra:
            return None
        by_keyword = {p.name.value for p in (*params.params, *params.kwonly_params)}
        rest = []
        for name, value in kwargs.items():
            if name in env or name not in by_keyword:
                if params.star_kwarg is None or name in env:
                    return None
                rest.append((name, value))
            else:
                env[name] = value
        if params.star_kwarg is not None:
            env[params.star_kwarg.name.value] = Mapping(tuple(rest))
        for param in (*positional, *params.kwonly_params):
            if param.name.value not in env:
                if param.default is None:
                    return None
                env[param.name.value] = self.ev(param.default, fn.scope)
        return env

    def _nested_jit(self, jitted: Jitted, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        """A jitted helper called inside a jitted function: its outputs pass through a call."""
        for keyword in ("in_shardings", "out_shardings", "in_axis_resources", "out_axis_resources"):
            if self._option(jitted.options, keyword) is not NONE:
                return UNKNOWN
        return _after_each(self.apply(jitted.target, args, kwargs, node, scope), "compute", "nested jit", node)

    def _transformed(self, transform: Transform, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        result = self.apply(transform.fn, args, kwargs, node, scope)
        if transform.kind == "shard_map":
            return _after_each(result, "compute", "shard_map", node)
        if transform.kind == "checkpoint":
            return map_leaves(result, lambda leaf: UNKNOWN if isinstance(leaf, HostArray) else leaf)
        return result

    def _differentiated(self, grad: Differentiated, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        """The value is ``f`` traced on the arguments; a gradient is device memory when every
        input is (the cotangent of a move to host is a move back), else unknown."""
        value = self.apply(grad.fn, args, kwargs, node, scope)
        aux = UNKNOWN
        if grad.has_aux:
            if isinstance(value, Seq) and len(value.items) == 2:
                value, aux = value.items
            else:
                value = UNKNOWN
        positions = grad.argnums if isinstance(grad.argnums, tuple) else (grad.argnums,)
        if not all(-len(args) <= i < len(args) for i in positions):
            return UNKNOWN
        on_device = all(isinstance(leaf, (DeviceArray, Const)) for a in (*args, *kwargs.values()) for leaf in leaves(a))
        grads = [map_leaves(args[i], lambda leaf: DeviceArray(is_single_array(leaf)) if on_device else UNKNOWN)
                 for i in positions]
        gradient = grads[0] if not isinstance(grad.argnums, tuple) else Seq(tuple(grads))
        if grad.has_aux:
            return Seq((Seq((value, aux)), gradient)) if grad.with_value else Seq((gradient, aux))
        return Seq((value, gradient)) if grad.with_value else gradient

    # ------------------------------------------------------------------ JAX semantics
    def _put(self, x: Any, target: Any, node: Any) -> Any:
        if target is _ABSENT or target is NONE:
            return _after_each(x, "noop_put", "device_put", node)
        if isinstance(target, (Seq, Mapping)):
            if isinstance(x, Seq) and isinstance(target, Seq) and len(x.items) == len(target.items):
                return Seq(tuple(self._put(a, t, node) for a, t in zip(x.items, target.items)), x.is_list)
            if isinstance(x, Mapping) and isinstance(target, Mapping) and \
                    sorted(map(repr, (k for k, _ in x.items))) == sorted(map(repr, (k for k, _ in target.items))):
                return Mapping(tuple((k, self._put(v, target.get(k), node)) for k, v in x.items))
            return UNKNOWN
        kind = memory_kind_of(target)
        if kind in names.HOST_KINDS:
            origin = HostOrigin("move_to_host", kind, node, f"jax.device_put to {kind} memory",
                                condition=_condition_of(target))
            return map_leaves(x, lambda leaf: HostArray(origin, single=is_single_array(leaf)))
        if kind in names.DEVICE_KINDS:
            return map_leaves(x, lambda leaf: DeviceArray(single=is_single_array(leaf), explicit=True))
        if kind == "device_ref":
            return _after_each(x, "noop_put", "device_put", node)
        if kind == "nokind":
            return map_leaves(x, lambda leaf: UNKNOWN if isinstance(leaf, HostArray) else leaf)
        return UNKNOWN

    def _compute(self, op: str, operands: tuple, node: Any, kind: str = "compute") -> Any:
        """An operation whose single array result is computed from its operands' data.

        ``kind`` names the operation for :data:`names.MAYBE_IDENTITY`; those that may be
        skipped by JAX are recorded as ``maybe_identity`` rather than ``compute``.
        """
        category = "maybe_identity" if kind == "maybe_identity" or kind in names.MAYBE_IDENTITY else "compute"
        host = None
        unknown = explicit = False
        for operand in operands:
            for leaf in leaves(operand):
                if isinstance(leaf, HostArray):
                    if host is None:
                        host = leaf
                    elif (host.origin.kind, host.origin.memory_kind) != (leaf.origin.kind, leaf.origin.memory_kind):
                        return UNKNOWN
                    explicit = explicit or "explicit_device" in leaf.steps
                elif isinstance(leaf, DeviceArray):
                    explicit = explicit or leaf.explicit
                elif not isinstance(leaf, (Const, Ref, ShardingSpec, DeviceRef)):
                    unknown = True
        if host is not None:
            result = host.after(category, op, node)
            if explicit:
                result = replace(result, steps=result.steps | {"explicit_device"})
            return result if result.single else HostArray(result.origin, result.steps, result.trace, True)
        if unknown or self._host_compute_depth:
            return UNKNOWN
        return DeviceArray(True, explicit) if explicit else DEVICE_LEAF

    def _tree_map(self, fn: Any, tree: Any, rest: list, node: Any, scope: Any) -> Any:
        """``jax.tree.map(fn, tree, *rest)`` over a pytree literal, leaf by leaf."""
        if isinstance(tree, Seq):
            if not all(isinstance(r, Seq) and len(r.items) == len(tree.items) for r in rest):
                return UNKNOWN
            return Seq(tuple(self._tree_map(fn, t, [r.items[i] for r in rest], node, scope)
                             for i, t in enumerate(tree.items)), tree.is_list)
        if isinstance(tree, Mapping):
            keys = [k for k, _ in tree.items]
            if not all(isinstance(r, Mapping) and [k for k, _ in r.items] == keys for r in rest):
                return UNKNOWN
            return Mapping(tuple((k, self._tree_map(fn, t, [r.items[i][1] for r in rest], node, scope))
                                 for i, (k, t) in enumerate(tree.items)))
        if tree is NONE:
            return NONE
        result = self.apply(fn, [tree, *rest], {}, node, scope)
        if is_single_array(tree):
            return result
        if isinstance(result, ShardingSpec) and result.memory_kind is not None:
            # Every leaf of a sharding tree mapped to the same memory kind: one prefix leaf.
            return result
        # ``tree`` stands for a subtree of unknown structure: each of its leaves maps alike.
        if isinstance(result, HostArray):
            return HostArray(result.origin, result.steps, result.trace, single=False)
        return DeviceArray(False, result.explicit) if isinstance(result, DeviceArray) else UNKNOWN

    def _scan(self, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        body = _call_argument(args, kwargs, 0, "f")
        init = _call_argument(args, kwargs, 1, "init")
        xs = _call_argument(args, kwargs, 2, "xs", NONE)
        if body is _ABSENT or init is _ABSENT:
            return UNKNOWN
        carry = _enter_carry(init, node)
        out = self.apply(body, [carry, map_leaves(xs, functools.partial(_slice, node=node))], {}, node, scope)
        if not isinstance(out, Seq) or len(out.items) != 2:
            return UNKNOWN
        return Seq((_carry_result(carry, out.items[0]), map_leaves(out.items[1], _stacked)))

    def _map(self, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        body = _call_argument(args, kwargs, 0, "f")
        xs = _call_argument(args, kwargs, 1, "xs")
        if body is _ABSENT or xs is _ABSENT:
            return UNKNOWN
        sliced = map_leaves(xs, functools.partial(_slice, node=node))
        return map_leaves(self.apply(body, [sliced], {}, node, scope), _stacked)

    def _while_loop(self, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        body = _call_argument(args, kwargs, 1, "body_fun")
        init = _call_argument(args, kwargs, 2, "init_val")
        if body is _ABSENT or init is _ABSENT:
            return UNKNOWN
        carry = _enter_carry(init, node)
        return _carry_result(carry, self.apply(body, [carry], {}, node, scope))

    def _fori_loop(self, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        body = _call_argument(args, kwargs, 2, "body_fun")
        init = _call_argument(args, kwargs, 3, "init_val")
        if body is _ABSENT or init is _ABSENT:
            return UNKNOWN
        carry = _enter_carry(init, node)
        return _carry_result(carry, self.apply(body, [UNKNOWN, carry], {}, node, scope))

    def _cond(self, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        if len(args) < 3 or kwargs:
            return UNKNOWN
        branches = [self.apply(branch, list(args[3:]), {}, node, scope) for branch in args[1:3]]
        return _merge_branches(branches, node)

    def _switch(self, args: list, kwargs: dict, node: Any, scope: Any) -> Any:
        if len(args) < 2 or kwargs or not isinstance(args[1], Seq) or not args[1].items:
            return UNKNOWN
        branches = [self.apply(branch, list(args[2:]), {}, node, scope) for branch in args[1].items]
        return _merge_branches(branches, node)


@dataclass(frozen=True)
class ShardingLeaf:
    """A leaf of ``in_shardings`` with the expression that spells it (for the origin span)."""

    value: Any
    node: Any


_TRANSFORMS = (("vmap", names.VMAP), ("shard_map", names.SHARD_MAP), ("checkpoint", names.CHECKPOINT))
_CONTROL_FLOW = {
    names.LAX_SCAN: Interpreter._scan,
    names.LAX_MAP: Interpreter._map,
    names.LAX_WHILE: Interpreter._while_loop,
    names.LAX_FORI: Interpreter._fori_loop,
    names.LAX_COND: Interpreter._cond,
    names.LAX_SWITCH: Interpreter._switch,
}
_DISPATCH = {
    cst.Name: Interpreter._ev_name,
    cst.Integer: Interpreter._ev_literal,
    cst.Float: Interpreter._ev_literal,
    cst.Imaginary: Interpreter._ev_literal,
    cst.SimpleString: Interpreter._ev_literal,
    cst.Attribute: Interpreter._ev_attribute,
    cst.Subscript: Interpreter._ev_subscript,
    cst.Call: Interpreter._ev_call,
    cst.Tuple: Interpreter._ev_tuple,
    cst.List: Interpreter._ev_tuple,
    cst.Dict: Interpreter._ev_dict,
    cst.BinaryOperation: Interpreter._ev_binary,
    cst.UnaryOperation: Interpreter._ev_unary,
    cst.Comparison: Interpreter._ev_comparison,
    cst.BooleanOperation: Interpreter._ev_boolean,
    cst.IfExp: Interpreter._ev_if_exp,
    cst.Lambda: Interpreter._ev_lambda,
    cst.NamedExpr: Interpreter._ev_named_expr,
    cst.Ellipsis: lambda self, node, scope: _STATIC,
}


def memory_kind_of(value: Any) -> str | None:
    """The memory a ``device_put`` target or sharding names: a kind, ``nokind``, ``device_ref``."""
    if isinstance(value, ShardingLeaf):
        value = value.value
    if isinstance(value, ShardingSpec):
        if value.memory_kind is None:
            return "nokind"
        if value.memory_kind in names.HOST_KINDS or value.memory_kind in names.DEVICE_KINDS:
            return value.memory_kind
        return None
    if isinstance(value, Ref):
        if value.qualname in names.SPACE_HOST:
            return PINNED_HOST
        if value.qualname in names.SPACE_DEVICE:
            return DEVICE
        return None
    if isinstance(value, DeviceRef):
        return "device_ref"
    return None


def _condition_of(target: Any) -> Any:
    return target.condition if isinstance(target, ShardingSpec) else None


def _attach(value: Any, node: Any) -> Any:
    if isinstance(value, Seq):
        return Seq(tuple(_attach(v, node) for v in value.items), value.is_list)
    if isinstance(value, Mapping):
        return Mapping(tuple((k, _attach(v, node)) for k, v in value.items))
    if value is NONE or value is UNKNOWN:
        return value
    return ShardingLeaf(value, node)


_JIT_POSITIONAL = ("fun", "in_shardings", "out_shardings")


def _keywords(node: Any, scope: Any, positional: tuple = ()) -> JitOptions:
    """Options of a call, by keyword, and by position for the names in ``positional``."""
    options = []
    for index, arg in enumerate(node.args):
        if arg.keyword is not None:
            options.append((arg.keyword.value, arg.value, scope, arg))
        elif not arg.star and 0 < index < len(positional):
            options.append((positional[index], arg.value, scope, arg))
    return JitOptions(tuple(options))


def _call_argument(args: list, kwargs: dict, position: int, keyword: str, default: Any = _ABSENT) -> Any:
    if len(args) > position:
        return args[position]
    return kwargs.get(keyword, default)


def _after_each(value: Any, category: str, op: str, node: Any) -> Any:
    return map_leaves(value, lambda leaf: leaf.after(category, op, node) if isinstance(leaf, HostArray) else leaf)


def _uniform(value: Any) -> bool:
    """A pytree of unknown structure whose leaves are all in one memory."""
    return isinstance(value, (HostArray, DeviceArray)) and not value.single


def _map_keeping_structure(tree: Any, fn: Any) -> Any:
    """``fn`` on each leaf; a leaf standing for a subtree of unknown structure stays one."""
    def leaf(value: Any) -> Any:
        result = fn(value)
        if is_single_array(value) or not isinstance(result, (HostArray, DeviceArray)):
            return result
        return replace(result, single=False)

    return map_leaves(tree, leaf)


def _is_dataclass_call(node: cst.Call, scope: Any, interpreter: Interpreter) -> bool:
    """``@dataclass(frozen=True)`` and the like."""
    callee = interpreter.ev(node.func, scope)
    return isinstance(callee, Ref) and callee.qualname in names.DATACLASS


def _instantiate(fields: tuple, args: list, kwargs: dict) -> Any:
    """A dataclass instance: positional arguments in field order, then keywords, then defaults."""
    if len(args) > len(fields) or set(kwargs) - {name for name, _ in fields}:
        return UNKNOWN
    values = dict(fields)
    for (name, _), value in zip(fields, args):
        values[name] = value
    values.update(kwargs)
    return Instance(tuple((name, values[name]) for name, _ in fields))


def _differentiation(with_value: bool, args: list, kwargs: dict) -> Any:
    """``jax.grad``/``value_and_grad`` with the ``argnums`` and ``has_aux`` it can read."""
    if len(args) > 1 or set(kwargs) - {"argnums", "has_aux"}:
        return UNKNOWN
    argnums = kwargs.get("argnums", Const(0))
    has_aux = kwargs.get("has_aux", Const(False))
    if not isinstance(has_aux, Const) or not isinstance(has_aux.value, bool):
        return UNKNOWN
    if isinstance(argnums, Seq) and all(isinstance(i, Const) and type(i.value) is int for i in argnums.items):
        positions: Any = tuple(i.value for i in argnums.items)
    elif isinstance(argnums, Const) and type(argnums.value) is int:
        positions = argnums.value
    else:
        return UNKNOWN
    return Differentiated(with_value, args[0], positions, has_aux.value)


def _custom_jvp(value: Any) -> Any:
    return Function(value.node, value.scope, "custom_jvp") if isinstance(value, Function) else UNKNOWN


def _enter_carry(init: Any, node: Any) -> Any:
    return _after_each(init, "carry", "loop carry", node)


def _slice(leaf: Any, node: Any) -> Any:
    """One iteration's slice of a scanned-over leaf. A slice of host data is still host data;
    XLA streams it when it only feeds a move to device, so the slice alone decides nothing."""
    if isinstance(leaf, DeviceArray):
        return leaf
    if isinstance(leaf, HostArray):
        sliced = leaf.after("maybe_identity", "scan slice", node)
        return HostArray(sliced.origin, sliced.steps, sliced.trace, leaf.single)
    return UNKNOWN


def _element(iterated: Any) -> Any:
    """What a Python ``for`` over a value binds: each item of a pytree whose leaves are all
    in one memory is a subtree in that memory (the layers of a parameter list)."""
    if isinstance(iterated, (HostArray, DeviceArray)) and not iterated.single:
        return iterated
    if isinstance(iterated, Seq) and iterated.items:
        return functools.reduce(join, iterated.items)
    return UNKNOWN


def _stacked(leaf: Any) -> Any:
    """Per-iteration results stacked by scan/map: a host ``y`` gives host ``ys``."""
    if isinstance(leaf, (HostArray, DeviceArray)):
        return leaf
    return DEVICE_LEAF if isinstance(leaf, Const) else UNKNOWN


def _carry_result(carry_in: Any, carry_out: Any) -> Any:
    """A loop's final carry: an unchanged host carry stays host, a device one stays device."""
    if carry_out is carry_in:
        return carry_in
    if isinstance(carry_in, Seq) and isinstance(carry_out, Seq) and len(carry_in.items) == len(carry_out.items):
        return Seq(tuple(_carry_result(a, b) for a, b in zip(carry_in.items, carry_out.items)), carry_in.is_list)
    if isinstance(carry_in, Mapping) and isinstance(carry_out, Mapping) and \
            [k for k, _ in carry_in.items] == [k for k, _ in carry_out.items]:
        return Mapping(tuple((k, _carry_result(a, b)) for (k, a), (_, b) in zip(carry_in.items, carry_out.items)))
    if isinstance(carry_in, (DeviceArray, Const)) and isinstance(carry_out, (DeviceArray, Const)):
        return DeviceArray(False, any(getattr(c, "explicit", False) for c in (carry_in, carry_out)))
    return UNKNOWN


def _merge_branches(values: list, node: Any) -> Any:
    """The result of ``cond``/``switch``: host if a branch returns host at that leaf."""
    first = values[0]
    if all(isinstance(v, Seq) and len(v.items) == len(first.items) for v in values):
        return Seq(tuple(_merge_branches([v.items[i] for v in values], node) for i in range(len(first.items))),
                   first.is_list)
    if all(isinstance(v, Mapping) and [k for k, _ in v.items] == [k for k, _ in first.items] for v in values):
        return Mapping(tuple((k, _merge_branches([v.items[i][1] for v in values], node))
                             for i, (k, _) in enumerate(first.items)))
    if all(v is NONE for v in values):
        return NONE
    if not all(isinstance(v, (HostArray, DeviceArray, Const)) for v in values):
        return UNKNOWN
    hosts = [v for v in values if isinstance(v, HostArray)]
    if not hosts:
        return DeviceArray(all(is_single_array(v) for v in values),
                           any(isinstance(v, DeviceArray) and v.explicit for v in values))
    if len({(h.origin.kind, h.origin.memory_kind) for h in hosts}) > 1:
        return UNKNOWN
    merged = hosts[0]
    for other in hosts[1:]:
        merged = HostArray(merged.origin, merged.steps | other.steps, merged.trace, merged.single and other.single)
    return merged.after("compute" if len(hosts) == len(values) else "cond_mixed", "cond", node)


def _join_env(a: dict, b: dict, test: Any = None) -> dict:
    """Environments after two paths meet; ``test``: the flag ``if`` they come from (``a`` is
    the branch taken when it is true)."""
    joined = {}
    for name in a.keys() | b.keys():
        if name in a and name in b:
            joined[name] = join(a[name], b[name]) if test is None else join_branches(a[name], b[name], test)
        else:
            joined[name] = UNKNOWN
    return joined


def _truth(value: Any) -> bool | None:
    """The truth of an ``if`` test when the check knows it (a Python constant or literal)."""
    if isinstance(value, Const) and value is not _STATIC:
        return bool(value.value)
    if value is NONE:
        return False
    if isinstance(value, (Seq, Mapping)):
        return bool(value.items)
    return None


def condition_key(test: Any) -> tuple[str, bool]:
    """A flag test as text and polarity, ``not`` stripped: two tests with the same key are the
    same flag."""
    holds = True
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, holds = test.expression, not holds
    return _EMPTY_MODULE.code_for_node(test), holds


def _conditional(value: Any) -> bool:
    for leaf in leaves(value):
        if isinstance(leaf, HostArray) and leaf.origin.condition is not None:
            return True
        if isinstance(leaf, ShardingSpec) and leaf.condition is not None:
            return True
    return False


def _masked(env: dict, flag: tuple[str, bool] | None, branch: bool) -> dict:
    """The environment a branch of an undecided ``if`` starts from: a value host only on
    another branch is unknown there (the two tests may be correlated), unless this is the
    same flag on the side where the value is host."""
    masked = dict(env)
    for name, value in env.items():
        if not _conditional(value):
            continue
        if flag is not None and _same_side(value, flag, branch):
            continue
        masked[name] = _Masked(name)
    return masked


def _same_side(value: Any, flag: tuple[str, bool], branch: bool) -> bool:
    text, holds = flag
    for leaf in leaves(value):
        condition = leaf.origin.condition if isinstance(leaf, HostArray) else getattr(leaf, "condition", None)
        if condition is None:
            continue
        leaf_text, leaf_holds = condition_key(condition.test)
        if leaf_text != text or leaf_holds != (condition.holds == (holds == branch)):
            return False
    return True


def _unmasked(env: dict, before: dict) -> dict:
    """A branch's environment with the values it did not assign as they were before it."""
    restored = dict(env)
    for name, value in env.items():
        if isinstance(value, _Masked) and value.name == name:
            restored[name] = before[name]
    return restored


class _Masked:
    """Unknown inside a branch: the value of ``name`` before it, host only on another branch."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"UNKNOWN(masked {self.name})"


_EMPTY_MODULE = cst.Module(body=())


def _names_in(node: Any) -> Iterator[str]:
    """Names read in an expression (not attribute names), outside nested scopes."""
    stack = [node]
    while stack:
        current = stack.pop()
        if type(current) is cst.Name:
            yield current.value
            continue
        if type(current) is cst.Attribute:
            stack.append(current.value)
            continue
        for name in _fields(type(current)):
            child = getattr(current, name)
            if type(child) in (tuple, list):
                stack.extend(item for item in child if _SAME_SCOPE_NODE[type(item)])
            elif _SAME_SCOPE_NODE[type(child)]:
                stack.append(child)


def _may_mutate(callee: Any) -> bool:
    """Calls that might change a dict or list passed to them (anything but modelled JAX APIs;
    a transformed function receives a pytree rebuilt from tracers, never the caller's)."""
    if isinstance(callee, (Differentiated, Jitted, Transform)):
        return False
    if isinstance(callee, Ref):
        qualname = callee.qualname
        return not (qualname.startswith("jax.") or qualname in names.PARTIAL or qualname.startswith("builtins."))
    return True


def _bound_names(statements: list) -> set[str]:
    collector = BindingCollector().collect(statements)
    return set(collector.bindings) | collector.declared


def _index_parts(node: cst.Subscript) -> Iterator[Any]:
    for element in node.slice:
        part = element.slice
        if isinstance(part, cst.Index):
            yield part.value
        else:
            for bound in (part.lower, part.upper, part.step):
                if bound is not None:
                    yield bound


def _whole_axis(part: Any) -> bool:
    """``:`` or ``...`` in an index: selects everything along the axis."""
    if isinstance(part, cst.Slice):
        return part.lower is None and part.upper is None and part.step is None
    return isinstance(part.value, cst.Ellipsis)


def _header_expressions(statement: Any) -> list:
    """Expressions of a compound statement's header (``if test:``, ``for x in it:``, ``with e:``)."""
    if isinstance(statement, (cst.If, cst.While)):
        return [statement.test]
    if isinstance(statement, cst.For):
        return [statement.iter]
    if isinstance(statement, cst.With):
        return [item.item for item in statement.items]
    return []


_SKIPPED_FIELDS = (
    "whitespace", "lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after", "header",
    "footer", "newline", "equal", "colon", "lbrace", "rbrace", "lbracket", "rbracket", "first_line",
    "empty_lines", "indent", "dot", "star", "asynchronous", "operator", "annotation", "returns",
)
_NEW_SCOPES = (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.FunctionDef, cst.ClassDef)
_FIELDS: dict[type, tuple] = {}


def _fields(cls: type) -> tuple:
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = tuple(name for name in cls.__dataclass_fields__ if not name.startswith(_SKIPPED_FIELDS))
        _FIELDS[cls] = fields
    return fields


def _calls_in(node: Any) -> Iterator[cst.Call]:
    """Every call in an expression or simple statement, outside nested scopes.

    A hand-written walk: libcst's generic ``children`` is about ten times slower, and this
    runs over every statement of every file that passes the prefilter. Children are told
    apart by exact type (:data:`_SAME_SCOPE_NODE`): ``isinstance`` against libcst's abstract
    classes goes through ``ABCMeta`` and cost more than half of the walk.
    """
    stack = [node]
    while stack:
        current = stack.pop()
        if type(current) is cst.Call:
            yield current
        for name in _fields(type(current)):
            child = getattr(current, name)
            kind = type(child)
            if kind is tuple or kind is list:
                for item in child:
                    if _SAME_SCOPE_NODE[type(item)]:
                        stack.append(item)
            elif _SAME_SCOPE_NODE[kind]:
                stack.append(child)


class _SameScopeNode(dict):
    """type -> whether it is a libcst node that does not open a scope, filled on first use."""

    def __missing__(self, kind: type) -> bool:
        found = self[kind] = issubclass(kind, cst.CSTNode) and not issubclass(kind, _NEW_SCOPES)
        return found


_SAME_SCOPE_NODE = _SameScopeNode()


@functools.lru_cache(maxsize=4096)
def _literal_value(text: str) -> Any:
    """``evaluated_value`` of a number or string literal (``ast.literal_eval`` of its text,
    which compiles it: literals repeat, so the values are kept)."""
    return ast.literal_eval(text)
