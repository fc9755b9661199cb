"""One walk over a module that collects what both codemods need: how ``jax``,
``functools.partial`` and friends are imported, every function with its returns,
parameters and bindings, every ``jax.jit`` site and every ``device_put`` call.

Name resolution is deliberately small (import aliases plus per-scope bindings with their
lines) rather than libcst's full scope analysis: it is all the fixes need and several
times cheaper on large files.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import CodePosition, CodeRange

JIT = "jax.jit"
PARTIAL = "functools.partial"
DEVICE_PUT = "jax.device_put"
SHARDING_CONSTRUCTORS = ("NamedSharding", "SingleDeviceSharding", "PositionalSharding", "GSPMDSharding")
TRANSFER_TO_MEMORY_KIND = "TransferToMemoryKind"
_BUILTINS = frozenset(dir(builtins))


@dataclass
class Aliases:
    """Local names bound by imports to the things the fixes read or write."""

    jax_modules: list[str] = field(default_factory=list)
    from_jax: dict[str, str] = field(default_factory=dict)
    """local name -> attribute of ``jax`` (``from jax import jit as j`` gives ``{"j": "jit"}``)."""
    partial: list[str] = field(default_factory=list)
    functools_modules: list[str] = field(default_factory=list)
    transfer_to_memory_kind: list[str] = field(default_factory=list)

    def jax_module(self) -> str | None:
        if "jax" in self.jax_modules:
            return "jax"
        return self.jax_modules[0] if self.jax_modules else None

    def imported_from_jax(self, attr: str) -> str | None:
        for local, name in self.from_jax.items():
            if name == attr:
                return local
        return None

    def qualify(self, expr: cst.BaseExpression) -> str | None:
        """``jx.jit`` -> ``"jax.jit"``, ``partial`` -> ``"functools.partial"`` (None if not dotted)."""
        parts = dotted_parts(expr)
        if not parts:
            return None
        head, rest = parts[0], parts[1:]
        if head in self.jax_modules:
            return ".".join(["jax", *rest])
        if head in self.from_jax:
            return ".".join(["jax", self.from_jax[head], *rest])
        if head in self.functools_modules:
            return ".".join(["functools", *rest])
        if head in self.partial and not rest:
            return PARTIAL
        return ".".join(parts)


def dotted_parts(expr: cst.BaseExpression) -> list[str]:
    if isinstance(expr, cst.Name):
        return [expr.value]
    if isinstance(expr, cst.Attribute):
        head = dotted_parts(expr.value)
        return [*head, expr.attr.value] if head else []
    return []


def last_name(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


@dataclass
class Binding:
    line: int
    value: cst.BaseExpression | None
    """The right-hand side of a plain ``name = value`` (None for any other kind of binding)."""


@dataclass
class Scope:
    kind: str  # "module" | "class" | "function"
    node: cst.CSTNode
    parent: Scope | None
    bindings: dict[str, list[Binding]] = field(default_factory=dict)

    def bind(self, name: str, line: int, value: cst.BaseExpression | None = None) -> None:
        self.bindings.setdefault(name, []).append(Binding(line, value))

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
    def collect(cls, module: cst.Module, positions: Mapping[cst.CSTNode, CodeRange],
                line_map: Callable[[int], int] | None = None,
                reference_count: Callable[[str], int] | None = None) -> SourceFacts:
        """``line_map``: when ``module`` is an excerpt, its lines -> the file's, so that every
        position (and every line a target gives) is a file line."""
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
            quote="'" if walker.single_quoted > walker.double_quoted else '"',
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

    def statement_of(self, node: cst.CSTNode, function: FunctionInfo) -> tuple[cst.SimpleStatementLine, cst.IndentedBlock] | None:
        """The simple statement holding ``node`` inside ``function`` and the block it sits in."""
        target = self.positions[node]
        for block in _blocks(function.node.body):
            for statement in block.body:
                span = self.positions[statement]
                if (isinstance(statement, cst.SimpleStatementLine)
                        and span.start.line <= target.start.line and target.end.line <= span.end.line):
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
                    return any(b.line < line or (current.kind == "function" and b.line <= line) for b in bound)
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
        return sum(1 for node in _iter_names(self.module) if node.value == name)


class FileLines(Mapping[cst.CSTNode, CodeRange]):
    """Positions of an excerpt's nodes, in the lines of the file it was cut from."""

    def __init__(self, positions: Mapping[cst.CSTNode, CodeRange], line_map: Callable[[int], int]) -> None:
        self._positions = positions
        self._line_map = line_map

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        where = self._positions[node]
        start, end = where.start, where.end
        return CodeRange(CodePosition(self._line_map(start.line), start.column),
                         CodePosition(self._line_map(end.line), end.column))

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
        self.aliases = Aliases()
        self.module_scope = Scope("module", module, None)
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

    # ---------------------------------------------------------------- imports
    def visit_Import(self, node: cst.Import) -> None:
        line = self._line(node)
        for alias in node.names:
            parts = dotted_parts(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
                if parts == ["jax"]:
                    self.aliases.jax_modules.append(local)
                elif parts == ["functools"]:
                    self.aliases.functools_modules.append(local)
            else:
                local = parts[0]
                if local == "jax":
                    self.aliases.jax_modules.append("jax")
                elif parts == ["functools"]:
                    self.aliases.functools_modules.append("functools")
            self.scope.bind(local, line)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        line = self._line(node)
        module = ".".join(dotted_parts(node.module)) if node.module is not None else ""
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = last_name(alias.name) or ""
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
            if module == "jax" and not node.relative:
                self.aliases.from_jax[local] = name
            elif module == "functools" and name == "partial":
                self.aliases.partial.append(local)
            elif name == TRANSFER_TO_MEMORY_KIND and module.startswith("jax"):
                self.aliases.transfer_to_memory_kind.append(local)
            self.scope.bind(local, line)

    # ---------------------------------------------------------------- scopes
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.scope.bind(node.name.value, self._line(node))
        self.scopes.append(Scope("class", node, self.scope))
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
        self.scope.bind(node.name.value, first_line)
        enclosing_is_class = self.scopes[-1].kind == "class"
        scope = Scope("function", node, self.scope)
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
        for param in [*params.posonly_params, *params.params, *params.kwonly_params]:
            scope.bind(param.name.value, def_line)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                scope.bind(star.name.value, def_line)
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

    # ---------------------------------------------------------------- bindings
    def visit_Assign(self, node: cst.Assign) -> None:
        line = self._line(node)
        single = len(node.targets) == 1
        for target in node.targets:
            if isinstance(target.target, cst.Name) and single:
                self.scope.bind(target.target.value, line, node.value)
            else:
                for name in target_names(target.target):
                    self.scope.bind(name, line)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name) and node.value is not None:
            self.scope.bind(node.target.value, self._line(node), node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        for name in target_names(node.target):
            self.scope.bind(name, self._line(node))

    def visit_For(self, node: cst.For) -> None:
        for name in target_names(node.target):
            self.scope.bind(name, self._line(node))

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            for name in target_names(node.asname.name):
                self.scope.bind(name, self._line(node))

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None and isinstance(node.name.name, cst.Name):
            self.scope.bind(node.name.name.value, self._line(node))

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        for name in target_names(node.target):
            self.scope.bind(name, self._line(node))

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
                if (self.aliases.qualify(inner.func) == PARTIAL and inner.args
                        and self.aliases.qualify(inner.args[0].value) == JIT):
                    self.jit_calls.append((call, scope, line))


def target_names(target: cst.BaseExpression) -> list[str]:
    """The names an assignment target binds (through tuples, lists and starred targets)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        names: list[str] = []
        for element in target.elements:
            names.extend(target_names(element.value))
        return names
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return []
