"""Statements that do nothing, which a fix must never write: names assigned to themselves
(``mu, nu = mu, nu``, what a move put in a new statement before the one that unpacked the
values leaves behind) and a second move of a value to where it was just moved
(``device_put(device_put(x, D), D)``, or ``device_put(x, D)`` of an ``x`` the statements
before bound to that very move). ``fixes.apply.check_intended`` refuses a fix that adds one.
"""

from __future__ import annotations

import libcst as cst

from offload_fixer.codemods.sharding_exprs import device_put_destination, moved_value
from offload_fixer.source.bindings import last_name, target_name_nodes


def no_op_statements(module: cst.Module) -> list[str]:
    """The code of each statement of ``module`` that does nothing, or whose move is made twice."""
    finder = _NoOps(module)
    module.visit(finder)
    return finder.found


class _NoOps(cst.CSTVisitor):
    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        self.module = module
        self.found: list[str] = []
        self.moved: list[dict[str, str]] = [{}]
        """Per block being walked: names whose last binding is ``device_put(..., D)`` -> ``D``'s code."""

    # a nested block sees the moves made before it; its own bindings end at its end
    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.moved.append(dict(self.moved[-1]))

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        left = self.moved.pop()
        for name in list(self.moved[-1]):
            if left.get(name) != self.moved[-1][name]:
                del self.moved[-1][name]  # rebound in the block: not known after it

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.moved.append({})

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.moved.pop()

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        for small in node.body:
            if isinstance(small, cst.Assign) and any(_same(t.target, small.value) for t in small.targets):
                self.found.append(self._code(node))
        self._moves_twice(node)
        for small in node.body:
            self._bind(small)

    def _moves_twice(self, node: cst.SimpleStatementLine) -> None:
        class Calls(cst.CSTVisitor):
            def __init__(self) -> None:
                super().__init__()
                self.calls: list[cst.Call] = []

            def visit_Call(self, call: cst.Call) -> None:
                if last_name(call.func) == "device_put":
                    self.calls.append(call)

            def visit_Lambda(self, lambda_: cst.Lambda) -> bool:
                return False

        calls = Calls()
        node.visit(calls)
        for call in calls.calls:
            value, destination = moved_value(call), device_put_destination(call)
            if value is None or destination is None:
                continue
            where = self._code(destination)
            inner = _unparenthesized(value)
            if isinstance(inner, cst.Call) and last_name(inner.func) == "device_put":
                again = device_put_destination(inner)
                if again is not None and self._code(again) == where:
                    self.found.append(self._code(node))
                    return
            if isinstance(inner, cst.Name) and self.moved[-1].get(inner.value) == where:
                self.found.append(self._code(node))
                return

    def _bind(self, small: cst.BaseSmallStatement) -> None:
        targets: list[cst.BaseExpression] = []
        if isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
        elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
            targets = [small.target]
        names = [name.value for target in targets for name in target_name_nodes(target)]
        for name in names:
            self.moved[-1].pop(name, None)
        if isinstance(small, cst.Assign) and len(names) == 1 and isinstance(small.targets[0].target, cst.Name):
            value = _unparenthesized(small.value)
            if isinstance(value, cst.Call) and last_name(value.func) == "device_put":
                destination = device_put_destination(value)
                if destination is not None:
                    self.moved[-1][names[0]] = self._code(destination)

    def visit_For(self, node: cst.For) -> None:
        for name in target_name_nodes(node.target):
            self.moved[-1].pop(name.value, None)

    def _code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node).strip()


def _same(target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    """Whether assigning ``value`` to ``target`` binds every name to itself."""
    target, value = _unparenthesized(target), _unparenthesized(value)
    if isinstance(target, cst.Name):
        return isinstance(value, cst.Name) and value.value == target.value
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
        targets, values = target.elements, value.elements
        return (
            len(targets) == len(values)
            and not any(isinstance(e, cst.StarredElement) for e in (*targets, *values))
            and all(_same(t.value, v.value) for t, v in zip(targets, values))
        )
    return False


def _unparenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``(x)`` as ``x``; a tuple keeps its parentheses (``()`` has nothing else)."""
    return expr.with_changes(lpar=[], rpar=[]) if expr.lpar and not isinstance(expr, cst.Tuple) else expr
