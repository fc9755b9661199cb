"""Running the statements of a traced function over abstract values.

Python control flow runs at trace time: an ``if`` the check can decide runs one branch, an
undecided one runs both and their environments meet (a test on a configuration flag keeps
a value that is host on one branch only, with that branch recorded); loops unroll.
:class:`StatementRunner` is a part of :class:`.interpreter.Interpreter`.
"""

from __future__ import annotations

import functools
from typing import Any, cast

import libcst as cst

from offload_fixer.source.bindings import block_statements, target_names

from . import iteration
from .eager import expects_exception, refined
from .evaluator import Evaluator
from .jax_api import HOST_COMPUTE_CONTEXT
from .scopes import Frame, StaticScope
from .syntax import bound_names, condition_key, names_in
from .values import (
    NONE,
    STATIC,
    UNKNOWN,
    AtIndexed,
    AtIndexer,
    Const,
    DeviceArray,
    HostArray,
    Instance,
    Mapping,
    Seq,
    ShardingSpec,
    join,
    join_branches,
    leaves,
)


class StatementRunner(Evaluator):
    """``exec_block`` and the statements it runs (the expressions are the interpreter's)."""

    def exec_block(self, statements: list, frame: Frame, returns: list) -> bool:
        """Run statements; True when every path leaves the block (return/raise/break)."""
        return any(self._exec(statement, frame, returns) for statement in statements)

    def _exec(self, statement: Any, frame: Frame, returns: list) -> bool:
        if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            return any(self._exec_small(small, frame, returns) for small in statement.body)
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
            return self._exec_try(statement, frame, returns)
        self._forget(bound_names([statement]), frame)
        return False

    def _exec_if(self, statement: cst.If, frame: Frame, returns: list) -> bool:
        """A test the check can decide (a constant flag) runs one branch. Otherwise both run
        and their environments meet; a test on a configuration flag (not on the arrays)
        keeps a value that is host on one branch only, with that branch recorded."""
        test = self.ev(statement.test, frame)
        decided = truth(test)
        if decided is True:
            return self.exec_block(block_statements(statement.body), frame, returns)
        if decided is False:
            return self._exec_else(statement, frame, returns)
        flag = condition_key(statement.test) if self.is_flag(statement.test, test, frame) else None
        when_true, when_false = (
            refined(statement.test, lambda node: self.ev(node, frame), frame.lookup) if self.in_eager_code else ({}, {})
        )
        before = dict(frame.env)
        frame.env = _masked(before, flag, True)
        frame.env.update(when_true)
        body_leaves = self.exec_block(block_statements(statement.body), frame, returns)
        after_body = _unmasked(frame.env, before)
        frame.env = _masked(before, flag, False)
        frame.env.update(when_false)
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

    def _exec_try(self, statement: cst.Try | cst.TryStar, frame: Frame, returns: list) -> bool:
        """The body, then ``else`` when the body completes; each handler starts from a state
        where what the body assigned may or may not have happened. Paths that complete meet;
        ``finally`` runs after them."""
        before = dict(frame.env)
        leaves = self.exec_block(block_statements(statement.body), frame, returns)
        if not leaves and statement.orelse is not None:
            leaves = self.exec_block(block_statements(statement.orelse.body), frame, returns)
        completed = [] if leaves else [frame.env]
        raised = _join_env(before, frame.env)
        for handler in statement.handlers:
            frame.env = dict(raised)
            if handler.name is not None:
                self._forget(target_names(handler.name.name), frame)
            if not self.exec_block(block_statements(handler.body), frame, returns):
                completed.append(frame.env)
        frame.env = functools.reduce(_join_env, completed) if completed else raised
        finally_leaves = False
        if statement.finalbody is not None:
            finally_leaves = self.exec_block(block_statements(statement.finalbody.body), frame, returns)
        return finally_leaves or not completed

    def is_flag(self, node: Any, test: Any, scope: Any) -> bool:
        """Whether an ``if`` test is a configuration flag: it names no array (a test on the
        values themselves, such as their memory kind, is correlated with what they hold)."""
        if any(isinstance(leaf, (HostArray, DeviceArray)) for leaf in leaves(test)):
            return False
        for name in names_in(node):
            value = scope.lookup(name)
            if any(isinstance(leaf, (HostArray, DeviceArray, AtIndexer, AtIndexed)) for leaf in leaves(value)):
                return False
        return True

    def _exec_loop(self, statement: Any, frame: Frame, returns: list) -> None:
        """Python loops unroll at trace time: run the body twice from the joined state and keep
        only what every iteration agrees on; ``return``s count from the second pass."""
        body = block_statements(statement.body)
        before = dict(frame.env)
        iterated = self._loop_pass(statement, body, frame, [])
        # A loop over the layers of a pytree (or a non-empty literal) runs at least once: what
        # one iteration leaves is the state the next starts from, not the state before the loop.
        runs_once = isinstance(statement, cst.For) and iteration.nonempty(iterated)
        joined = dict(frame.env) if runs_once else _join_env(before, frame.env)
        frame.env = dict(joined)
        self._loop_pass(statement, body, frame, returns)
        frame.env = _join_env(joined, frame.env)
        if statement.orelse is not None:
            self.exec_block(block_statements(statement.orelse.body), frame, returns)

    def _loop_pass(self, statement: Any, body: list, frame: Frame, returns: list) -> Any:
        """One pass of a loop's body; what a ``for`` iterates over."""
        iterated = UNKNOWN
        if isinstance(statement, cst.For):
            iterated = self.ev(statement.iter, frame)
            self.assign(statement.target, iteration.element(iterated), frame)
        else:
            self.ev(statement.test, frame)
        self.exec_block(body, frame, returns)
        return iterated

    def _exec_with(self, statement: cst.With, frame: Frame, returns: list) -> bool:
        host_compute = 0
        expects_raise = 0
        for item in statement.items:
            if self.ev(item.item, frame) is HOST_COMPUTE_CONTEXT:
                host_compute += 1
            if self.in_eager_code and expects_exception(item.item):
                expects_raise = 1
            if item.asname is not None:
                self._forget(target_names(item.asname.name), frame)
        self._host_compute_depth += host_compute
        # A test's ``with pytest.raises(...)``/``self.assertRaises(...)``: the body is expected
        # to stop with an exception, maybe before any operation the check would report.
        self._silent += expects_raise
        try:
            return self.exec_block(block_statements(statement.body), frame, returns)
        finally:
            self._host_compute_depth -= host_compute
            self._silent -= expects_raise

    def _exec_small(self, small: Any, frame: Frame, returns: list) -> bool:
        if isinstance(small, cst.Assign):
            value = self.ev(small.value, frame)
            for target in small.targets:
                self.assign(target.target, value, frame)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self.assign(small.target, self.ev(small.value, frame), frame)
        elif isinstance(small, cst.AugAssign):
            if isinstance(small.target, cst.Name):
                current = frame.lookup(small.target.value)
                value = self.binary(current, small.operator, self.ev(small.value, frame), small)
                self.assign(small.target, value, frame)
            else:
                self.forget_base(small.target, frame)
        elif isinstance(small, cst.Expr):
            self.ev(small.value, frame)
        elif isinstance(small, cst.Return):
            value = NONE if small.value is None else self.ev(small.value, frame)
            returns.append((small, value))
            return True
        elif isinstance(small, cst.Raise):
            if small.exc is not None:  # ``raise SystemExit(main())`` runs ``main()`` first
                self.ev(small.exc, frame)
            return True
        elif isinstance(small, (cst.Break, cst.Continue)):
            return True
        elif isinstance(small, (cst.Import, cst.ImportFrom)):
            scope = StaticScope(self, [cst.SimpleStatementLine(body=[small])], None, module_path=frame.module_path)
            for name in scope.bindings:
                frame.env[name] = scope.lookup(name)
        elif isinstance(small, cst.Del):
            self._forget(target_names(small.target), frame)
            if not isinstance(small.target, (cst.Name, cst.Tuple, cst.List)):
                self.forget_base(small.target, frame)
        elif isinstance(small, (cst.Global, cst.Nonlocal)):
            self._forget([item.name.value for item in small.names], frame)
        return False

    def assign(self, target: Any, value: Any, frame: Frame) -> None:
        if isinstance(target, cst.Name):
            frame.env[target.value] = value
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            starred = [i for i, e in enumerate(elements) if isinstance(e, cst.StarredElement)]
            if isinstance(value, Seq) and not starred and len(value.items) == len(elements):
                for element, item in zip(elements, value.items):
                    self.assign(element.value, item, frame)
            elif isinstance(value, Seq) and len(starred) == 1 and len(value.items) >= len(elements) - 1:
                split, tail = starred[0], len(elements) - starred[0] - 1
                for element, item in zip(elements[:split], value.items[:split]):
                    self.assign(element.value, item, frame)
                rest = value.items[split : len(value.items) - tail]
                self.assign(elements[split].value, Seq(rest, True), frame)
                for element, item in zip(elements[split + 1 :], value.items[len(value.items) - tail :]):
                    self.assign(element.value, item, frame)
            else:
                self._forget(target_names(target), frame)
        elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            self._assign_item(target, value, frame)
        elif (
            isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and isinstance(instance := frame.lookup(target.value.value), Instance)
        ):
            self.forget_aliases(instance, frame)  # ``self.w = v``: this name's object, changed
            frame.env[target.value.value] = instance.with_field(target.attr.value, value)
        else:
            self.forget_base(target, frame)

    def _assign_item(self, target: cst.Subscript, value: Any, frame: Frame) -> None:
        """``d['k'] = v`` on a dict/list literal held by a local name."""
        name = cast(cst.Name, target.value).value  # the caller matched ``name[index]``
        container = frame.lookup(name)
        key = self.constant_index(target, frame)
        updated: Any = UNKNOWN
        if isinstance(container, Mapping) and key is not None:
            if container.get(key.value) is None:
                updated = Mapping(container.items + ((key.value, value),))
            else:
                updated = Mapping(tuple((k, value if k == key.value else v) for k, v in container.items))
        elif (
            isinstance(container, Seq)
            and container.is_list
            and key is not None
            and isinstance(key.value, int)
            and -len(container.items) <= key.value < len(container.items)
        ):
            items = list(container.items)
            items[key.value] = value
            updated = Seq(tuple(items), True)
        self.forget_aliases(container, frame)
        frame.env[name] = updated

    def _forget(self, names_: Any, frame: Frame) -> None:
        for name in names_:
            frame.env[name] = UNKNOWN

    def forget_base(self, target: Any, frame: Frame) -> None:
        """An attribute or item of a local object changed in a way not modelled."""
        while isinstance(target, (cst.Attribute, cst.Subscript)):
            target = target.value
        if isinstance(target, cst.Name):
            self.forget_aliases(frame.lookup(target.value), frame)
            frame.env[target.value] = UNKNOWN

    def forget_aliases(self, container: Any, frame: Frame) -> None:
        if isinstance(container, (Seq, Mapping, Instance)):
            for other, value in list(frame.env.items()):
                if value is container:
                    frame.env[other] = UNKNOWN


def truth(value: Any) -> bool | None:
    """The truth of an ``if`` test when the check knows it (a Python constant or literal)."""
    if isinstance(value, Const) and value is not STATIC:
        return bool(value.value)
    if value is NONE:
        return False
    if isinstance(value, (Seq, Mapping)):
        return bool(value.items)
    return None


def conditional(value: Any) -> bool:
    """Whether a value is host only on one branch of an undecided ``if``."""
    for leaf in leaves(value):
        if isinstance(leaf, HostArray) and leaf.origin.condition is not None:
            return True
        if isinstance(leaf, ShardingSpec) and leaf.condition is not None:
            return True
    return False


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


def _masked(env: dict, flag: tuple[str, bool] | None, branch: bool) -> dict:
    """The environment a branch of an undecided ``if`` starts from: a value host only on
    another branch is unknown there (the two tests may be correlated), unless this is the
    same flag on the side where the value is host."""
    masked = dict(env)
    for name, value in env.items():
        if not conditional(value):
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
