"""One walk over a module that collects what the codemods need: how ``jax``,
``functools.partial`` and friends are imported, every function with its returns,
parameters and bindings, every ``jax.jit`` site and every ``device_put`` call.

Each scope's bindings come from the collector the static check uses too
(:mod:`offload_fixer.source.bindings`), read with their lines; imports resolve a name to
what it stands for through the same import bindings.

Over 500 lines on purpose: one walk over a module, and the facts it fills, read by every
codemod.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst.metadata import CodePosition, CodeRange

from offload_fixer.source.bindings import Binding, BindingCollector, block_statements, dotted_name, parameters

JIT = "jax.jit"
PARTIAL = "functools.partial"
DEVICE_PUT = "jax.device_put"
SHARDING_CONSTRUCTORS = ("NamedSharding", "SingleDeviceSharding", "PositionalSharding", "GSPMDSharding")
TRANSFER_TO_MEMORY_KIND = "TransferToMemoryKind"
_BUILTINS = frozenset(dir(builtins))


class Aliases:
    """What each name bound by an import anywhere in the module stands for (to read the code),
    and which of them the module binds when it runs (to write new code with)."""

    def __init__(self, imported: Mapping[str, str], bound: Mapping[str, str] | None = None) -> None:
        self.imported = dict(imported)
        """local name -> qualified name (``jnp`` -> ``jax.numpy``, ``j`` -> ``jax.jit``)."""
        self.bound = dict(self.imported if bound is None else bound)
        """The imports at module level that run: not under ``if TYPE_CHECKING:`` (a type
        checker's alone), nor in a function (a name another function cannot read)."""
        self._locals: dict[str, list[str]] = {}
        for local, qualname in self.bound.items():
            self._locals.setdefault(qualname, []).append(local)

    def locals_of(self, qualname: str) -> list[str]:
        """The module's names for ``qualname`` when it runs: the ones a fix may write."""
        return self._locals.get(qualname, [])

    def jax_module(self) -> str | None:
        found = self.locals_of("jax")
        return "jax" if "jax" in found else next(iter(found), None)

    def imported_from_jax(self, attr: str) -> str | None:
        return next(iter(self.locals_of(f"jax.{attr}")), None)

    @property
    def partial(self) -> list[str]:
        return self.locals_of(PARTIAL)

    @property
    def functools_modules(self) -> list[str]:
        return self.locals_of("functools")

    @property
    def transfer_to_memory_kind(self) -> list[str]:
        return [
            local
            for local, name in self.bound.items()
            if name.startswith("jax") and name.rpartition(".")[2] == TRANSFER_TO_MEMORY_KIND
        ]

    def qualify(self, expr: cst.BaseExpression) -> str | None:
        """``jx.jit`` -> ``"jax.jit"``, ``partial`` -> ``"functools.partial"`` (None if not dotted)."""
        name = dotted_name(expr)
        if name is None:
            return None
        head, dot, rest = name.partition(".")
        return self.imported[head] + dot + rest if head in self.imported else name


@dataclass
class Scope:
    kind: str  # "module" | "class" | "function"
    node: cst.CSTNode
    parent: Scope | None
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    """The scope's bindings but annotations without a value, which bind nothing yet, and the
    bindings under ``if TYPE_CHECKING:``, which the program never runs."""

    def single_value(self, name: str) -> Binding | None:
        """The one ``name = value`` binding of ``name`` here, if it is bound exactly once."""
        found = self.bindings.get(name, [])
        if len(found) == 1 and found[0].value is not None:
            return found[0]
        return None


@dataclass
class ReturnSite:
    node: cst.Return
    line: int
    end_line: int
    """Last line of the statement: a ``return (`` whose value starts below is found by any of them."""

    def spans(self, line: int) -> bool:
        return self.line <= line <= self.end_line


@dataclass
class FunctionInfo:
    node: cst.FunctionDef
    name: str
    class_name: str | None
    scope: Scope
    """The function's own scope (parameters and locals)."""
    first_line: int
    """First decorator line, as ``co_firstlineno`` reports it."""
    def_line: int
    end_line: int
    body_line: int
    returns: list[ReturnSite] = field(default_factory=list)
    positional_params: list[str] = field(default_factory=list)

    def contains(self, line: int) -> bool:
        return self.first_line <= line <= self.end_line


@dataclass
class JitSite:
    """A place that applies ``jax.jit`` to a function, with the call holding its options.

    kind: ``bare_decorator`` (``@jax.jit``), ``decorator`` (``@partial(jax.jit, ...)`` or
    ``@jax.jit(...)``), ``call`` (``jax.jit(f, ...)``, assigned or called inline) and
    ``partial_call`` (``partial(jax.jit, ...)(f)``).
    """

    kind: str
    node: cst.CSTNode
    """The expression to edit: the decorator expression or the ``jax.jit``/``partial`` call."""
    options: cst.Call | None
    line: int
    scope: Scope


@dataclass
class SourceFacts:
    module: cst.Module
    positions: Mapping[cst.CSTNode, CodeRange]
    aliases: Aliases
    module_scope: Scope
    functions: list[FunctionInfo]
    jit_calls: list[tuple[cst.Call, Scope, int]]
    device_puts: list[tuple[cst.Call, Scope, int]]
    quote: str
    """The string quote most of the module's literals use, for new string literals."""
    inline_calls: dict[cst.Call, cst.Call]
    """``jax.jit(f, ...)`` -> the call around it in ``jax.jit(f, ...)(x)``."""
    reference_count: Callable[[str], int] | None = None
    """Counts a name's uses in the whole file when ``module`` is an excerpt of it."""

    @classmethod
    def collect(
        cls,
        module: cst.Module,
        positions: Mapping[cst.CSTNode, CodeRange],
        line_map: Callable[[int], int] | None = None,
        reference_count: Callable[[str], int] | None = None,
        quote: str | None = None,
    ) -> SourceFacts:
        """``line_map``: when ``module`` is an excerpt, its lines -> the file's, so that every
        position (and every line a target gives) is a file line. ``quote``: the project's for
        new string literals; ``None``: the one most of the module's literals use."""
        if line_map is not None:
            positions = FileLines(positions, line_map)
        walker = _Walker(module, positions)
        module.visit(walker)
        return cls(
            module=module,
            positions=positions,
            aliases=walker.aliases,
            module_scope=walker.module_scope,
            functions=walker.functions,
            jit_calls=walker.jit_calls,
            device_puts=walker.device_puts,
            quote=quote or ("'" if walker.single_quoted > walker.double_quoted else '"'),
            inline_calls=walker.inline_calls,
            reference_count=reference_count,
        )

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    # ------------------------------------------------------------------ functions
    def find_function(self, name: str | None, line: int | None, inner_line: int | None) -> FunctionInfo | None:
        """By a line of the ``def``/decorators (and name), else the innermost function
        around ``inner_line`` that is jitted (else simply the innermost one)."""
        named = [f for f in self.functions if name is None or f.name == name.rsplit(".", 1)[-1]]
        if line is not None:
            for f in named:
                if f.first_line <= line <= f.def_line:
                    return f
        if inner_line is not None:
            around = sorted((f for f in named if f.contains(inner_line)), key=lambda f: -f.first_line)
            for f in around:
                if self.jit_sites(f):
                    return f
            if around:
                return around[0]
        if name is not None and len(named) == 1:
            return named[0]
        return None

    def jit_sites(self, function: FunctionInfo) -> list[JitSite]:
        sites: list[JitSite] = []
        outer = function.scope.parent or self.module_scope
        for decorator in function.node.decorators:
            expr = decorator.decorator
            line = self.line(decorator)
            if self.aliases.qualify(expr) == JIT:
                sites.append(JitSite("bare_decorator", expr, None, line, outer))
            elif isinstance(expr, cst.Call):
                callee = self.aliases.qualify(expr.func)
                partial_of_jit = callee == PARTIAL and expr.args and self.aliases.qualify(expr.args[0].value) == JIT
                if callee == JIT or partial_of_jit:
                    sites.append(JitSite("decorator", expr, expr, line, outer))
        for call, scope, line in self.jit_calls:
            if not (call.args and call.args[0].keyword is None and _refers_to(call.args[0].value, scope, function)):
                continue
            if self.aliases.qualify(call.func) == JIT:
                sites.append(JitSite("call", call, call, line, scope))
            elif isinstance(call.func, cst.Call):
                sites.append(JitSite("partial_call", call.func, call.func, line, scope))
        return sites

    def jit_sites_of_name(self, name: str, line: int) -> list[JitSite]:
        """The ``jax.jit(f, ...)`` call spanning ``line`` whose ``f`` is ``name`` (a plain name or
        ``module.name``): a function defined in another file, jitted here."""
        short = name.rsplit(".", 1)[-1]
        sites = []
        for call, scope, _ in self.jit_calls:
            span = self.positions[call]
            first = call.args[0] if call.args else None
            if not (span.start.line <= line <= span.end.line and first is not None and first.keyword is None):
                continue
            if (dotted_name(first.value) or "").rsplit(".", 1)[-1] == short and self.aliases.qualify(call.func) == JIT:
                sites.append(JitSite("call", call, call, span.start.line, scope))
        return sites

    def device_put_at(self, line: int, col: int | None) -> tuple[cst.Call, Scope] | None:
        """The ``device_put`` call on ``line``; with several, the one starting nearest ``col``
        (taken as either 0-based, as Python reports it, or 1-based, as MLIR does)."""
        found = []
        for call, scope, _ in self.device_puts:
            span = self.positions[call]
            if span.start.line <= line <= span.end.line:
                start = span.start.column
                distance = min(abs(start - col), abs(start + 1 - col)) if col is not None else 0
                found.append((span.start.line != line, distance, call, scope))
        if not found:
            return None
        found.sort(key=lambda item: (item[0], item[1]))
        return found[0][2], found[0][3]

    def statement_of(
        self, node: cst.CSTNode, function: FunctionInfo
    ) -> tuple[cst.SimpleStatementLine, cst.IndentedBlock] | None:
        """The simple statement holding ``node`` inside ``function`` and the block it sits in."""
        target = self.positions[node]
        for block in _blocks(function.node.body):
            for statement in block.body:
                span = self.positions[statement]
                if (
                    isinstance(statement, cst.SimpleStatementLine)
                    and span.start.line <= target.start.line
                    and target.end.line <= span.end.line
                ):
                    return statement, block
        return None

    # ------------------------------------------------------------------ names
    def visible(self, expr: cst.BaseExpression, scope: Scope, line: int) -> bool:
        """Whether every free name of ``expr`` is bound when code at ``line`` in ``scope`` runs.

        Names of the scope itself (and module names read from module level) must be bound on
        an earlier line; enclosing functions and the module, read from inside a function, are
        looked up at call time so any binding counts. Class scopes are skipped from inside
        methods, as Python does.
        """
        names = _free_names(expr)
        if names is None:
            return False
        return all(self._name_visible(name, scope, line) for name in names)

    def portable(self, expr: cst.BaseExpression, written_in: Scope, scope: Scope, line: int) -> bool:
        """Whether ``expr``, written in ``written_in``, means the same thing when evaluated in
        ``scope`` at ``line``: every name visible there and bound by the same scope."""
        names = _free_names(expr)
        if names is None or not self.visible(expr, scope, line):
            return False
        return all(_binding_scope(name, written_in) is _binding_scope(name, scope) for name in names)

    def binding_line(self, binding: Binding) -> int:
        """The line a binding is written on (a decorated ``def``'s first decorator, as
        ``co_firstlineno`` counts it)."""
        site = binding.site
        if isinstance(site, (cst.FunctionDef, cst.ClassDef)) and site.decorators:
            return self.line(site.decorators[0])
        return self.line(site)

    def _name_visible(self, name: str, scope: Scope, line: int) -> bool:
        at_import_time = scope.kind != "function"
        current: Scope | None = scope
        while current is not None:
            if current is not scope and current.kind == "class":
                current = current.parent
                continue
            bound = current.bindings.get(name, [])
            if bound:
                if current is scope or at_import_time:
                    lines = [self.binding_line(b) for b in bound]
                    return any(at < line or (current.kind == "function" and at <= line) for at in lines)
                return True
            current = current.parent
        return name in _BUILTINS

    def scope_chain_binding(self, name: str, scope: Scope) -> tuple[Binding, Scope] | None:
        """The single ``name = value`` binding that a read of ``name`` in ``scope`` sees."""
        current: Scope | None = scope
        while current is not None:
            if current is not scope and current.kind == "class":
                current = current.parent
                continue
            if name in current.bindings:
                found = current.single_value(name)
                return (found, current) if found else None
            current = current.parent
        return None

    def references(self, name: str) -> int:
        """How many times ``name`` is read or bound as a plain name anywhere in the file."""
        if self.reference_count is not None:
            return self.reference_count(name)
        return count_references(self.module, name)


class FileLines(Mapping[cst.CSTNode, CodeRange]):
    """Positions of an excerpt's nodes, in the lines of the file it was cut from."""

    def __init__(self, positions: Mapping[cst.CSTNode, CodeRange], line_map: Callable[[int], int]) -> None:
        self._positions = positions
        self._line_map = line_map

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        where = self._positions[node]
        start, end = where.start, where.end
        return CodeRange(
            CodePosition(self._line_map(start.line), start.column), CodePosition(self._line_map(end.line), end.column)
        )

    def __iter__(self) -> Iterator[cst.CSTNode]:
        return iter(self._positions)

    def __len__(self) -> int:
        return len(self._positions)


def _binding_scope(name: str, scope: Scope) -> Scope | None:
    current: Scope | None = scope
    while current is not None:
        if (current is scope or current.kind != "class") and name in current.bindings:
            return current
        current = current.parent
    return None


def _refers_to(expr: cst.BaseExpression, scope: Scope, function: FunctionInfo) -> bool:
    """``expr``, read in ``scope``, names ``function`` (a method: any ``obj.name``)."""
    if isinstance(expr, cst.Name):
        return expr.value == function.name and _binding_scope(expr.value, scope) is function.scope.parent
    if isinstance(expr, cst.Attribute) and function.class_name is not None:
        return expr.attr.value == function.name
    return False


def _blocks(node: cst.CSTNode) -> Iterator[cst.IndentedBlock]:
    """Every indented block of a function body, not entering nested functions or classes."""
    if isinstance(node, cst.IndentedBlock):
        yield node
        for statement in node.body:
            if not isinstance(statement, (cst.FunctionDef, cst.ClassDef, cst.SimpleStatementLine)):
                yield from _blocks(statement)
        return
    for child in node.children:
        if isinstance(child, (cst.IndentedBlock, cst.Else, cst.ExceptHandler, cst.Finally, cst.If)):
            yield from _blocks(child)


def count_references(module: cst.CSTNode, name: str) -> int:
    """How many times ``name`` is read or bound as a plain name in ``module``."""
    return sum(1 for node in _iter_names(module) if node.value == name)


def _iter_names(node: cst.CSTNode) -> Iterator[cst.Name]:
    """Plain names, leaving out attribute names (``x.name``) and keywords (``f(name=...)``)."""
    if isinstance(node, cst.Name):
        yield node
    elif isinstance(node, (cst.Attribute, cst.Arg)):
        yield from _iter_names(node.value)
    else:
        for child in node.children:
            yield from _iter_names(child)


def _free_names(expr: cst.CSTNode) -> set[str] | None:
    """Names read by ``expr``; None when it binds names itself (lambda, comprehension)."""
    if isinstance(expr, (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.NamedExpr)):
        return None
    if isinstance(expr, cst.Name):
        return {expr.value}
    names: set[str] = set()
    if isinstance(expr, cst.Attribute):
        inner = _free_names(expr.value)
        return inner
    for child in expr.children:
        inner = _free_names(child.value if isinstance(child, cst.Arg) else child)
        if inner is None:
            return None
        names |= inner
    return names


class _Walker(cst.CSTVisitor):
    def __init__(self, module: cst.Module, positions: Mapping[cst.CSTNode, CodeRange]) -> None:
        self.positions = positions
        self.imported: dict[str, str] = {}
        """What the imports of every scope bind, for :class:`Aliases` once the walk is done."""
        self.bound: dict[str, str] = {}
        """What the module's own imports bind when it runs (``TYPE_CHECKING`` ones left out)."""
        self.aliases = Aliases({})
        self.module_scope = self._scope("module", module, None, list(module.body))
        self.scopes: list[Scope] = [self.module_scope]
        self.function_stack: list[FunctionInfo | None] = []
        self.class_stack: list[str | None] = []
        self.functions: list[FunctionInfo] = []
        self.jit_calls: list[tuple[cst.Call, Scope, int]] = []
        self.device_puts: list[tuple[cst.Call, Scope, int]] = []
        self.pending_calls: list[tuple[cst.Call, Scope, int]] = []
        self.inline_calls: dict[cst.Call, cst.Call] = {}
        self.single_quoted = 0
        self.double_quoted = 0

    @property
    def scope(self) -> Scope:
        return self.scopes[-1]

    def _line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def _scope(
        self,
        kind: str,
        node: cst.CSTNode,
        parent: Scope | None,
        statements: list[Any],
        params: Sequence[cst.Param] = (),
    ) -> Scope:
        """A scope with its statements' bindings (and ``params``), its imports noted in ``imported``."""
        collector = BindingCollector()
        for param in params:
            collector.add(param.name.value, "parameter", param, param, 0, False)
        collector.collect(statements)
        bindings: dict[str, list[Binding]] = {}
        for name, found in collector.bindings.items():
            for binding in found:
                if binding.kind == "import":
                    self.imported[name] = binding.qualname
                    if kind == "module" and not binding.type_only:
                        self.bound[name] = binding.qualname
                if binding.kind != "annotation" and not binding.type_only:
                    bindings.setdefault(name, []).append(binding)
        return Scope(kind, node, parent, bindings)

    # ---------------------------------------------------------------- scopes
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.scopes.append(self._scope("class", node, self.scope, block_statements(node.body)))
        self.class_stack.append(node.name.value)
        self.function_stack.append(None)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.scopes.pop()
        self.class_stack.pop()
        self.function_stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        span = self.positions[node]
        def_line = self._line(node.name)
        first_line = min([def_line, *(self._line(d) for d in node.decorators)])
        enclosing_is_class = self.scopes[-1].kind == "class"
        scope = self._scope("function", node, self.scope, block_statements(node.body), parameters(node.params))
        body_line = def_line
        if isinstance(node.body, cst.IndentedBlock) and node.body.body:
            body_line = self._line(node.body.body[0])
        info = FunctionInfo(
            node=node,
            name=node.name.value,
            class_name=self.class_stack[-1] if enclosing_is_class and self.class_stack else None,
            scope=scope,
            first_line=first_line,
            def_line=def_line,
            end_line=span.end.line,
            body_line=body_line,
        )
        params = node.params
        for param in [*params.posonly_params, *params.params]:
            info.positional_params.append(param.name.value)
        self.functions.append(info)
        self.scopes.append(scope)
        self.function_stack.append(info)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scopes.pop()
        self.function_stack.pop()

    def visit_Return(self, node: cst.Return) -> None:
        if self.function_stack and self.function_stack[-1] is not None:
            where = self.positions[node]
            self.function_stack[-1].returns.append(ReturnSite(node, where.start.line, where.end.line))

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        """``:=`` binds in the enclosing scope from inside an expression, which the statement
        collector does not enter."""
        if isinstance(node.target, cst.Name):
            self.scope.bindings.setdefault(node.target.value, []).append(Binding("other", node, node, 0, True))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if node.quote == "'":
            self.single_quoted += 1
        elif node.quote == '"':
            self.double_quoted += 1

    # ---------------------------------------------------------------- calls
    def visit_Call(self, node: cst.Call) -> None:
        # Aliases may be imported below their first use inside functions, so calls are
        # classified after the walk (see leave_Module).
        self.pending_calls.append((node, self.scope, self._line(node)))

    def leave_Module(self, original_node: cst.Module) -> None:
        self.aliases = Aliases(self.imported, self.bound)
        for call, scope, line in self.pending_calls:
            if isinstance(call.func, cst.Call):
                self.inline_calls[call.func] = call
            callee = self.aliases.qualify(call.func)
            if callee == JIT:
                self.jit_calls.append((call, scope, line))
            elif callee == DEVICE_PUT:
                self.device_puts.append((call, scope, line))
            elif isinstance(call.func, cst.Call):
                inner = call.func
                if (
                    self.aliases.qualify(inner.func) == PARTIAL
                    and inner.args
                    and self.aliases.qualify(inner.args[0].value) == JIT
                ):
                    self.jit_calls.append((call, scope, line))
