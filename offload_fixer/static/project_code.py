"""The project's own code called from traced code: functions inlined (as JAX tracing inlines
Python calls), and classes: a ``@dataclass``, a ``NamedTuple`` or a plain class without bases
gives instances whose fields (attributes) are known, with their methods, properties and
``replace``; a call that may set an attribute of an object passed to it forgets that object.
:class:`ProjectCode` is a part of :class:`.interpreter.Interpreter`.
"""

from __future__ import annotations

import functools
from typing import Any

import libcst as cst

from offload_fixer.source.bindings import block_statements

from . import jax_api, names
from .evaluator import MAX_CALL_DEPTH, Evaluator, Unsupported
from .scopes import Frame, StaticScope
from .syntax import sets_parameter_attributes
from .values import (
    NONE,
    UNKNOWN,
    Bound,
    DataclassType,
    Differentiated,
    Function,
    Instance,
    Jitted,
    Mapping,
    Ref,
    ReplaceMethod,
    Seq,
    Transform,
    after_each,
    join,
)


class ProjectCode(Evaluator):
    """Calls of the project's functions and classes, and the classes' values."""

    def inline(self, fn: Function, args: list, kwargs: dict, node: Any, final: dict | None = None) -> Any:
        """Trace a helper of the same file: Python calls are inlined by JAX tracing. ``final``
        receives the names the function binds, as they are where it returns."""
        if fn.node in self._stack or len(self._stack) >= MAX_CALL_DEPTH or not self.eager_inlines(fn, args, kwargs):
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
                if final is not None:
                    final.update(frame.env)
                results = [value for _, value in collected]
                if not leaves_always:
                    results.append(NONE)
                # No return reached: the function always raises (or returns where the check cannot follow).
                result = functools.reduce(join, results) if results else UNKNOWN
        except Unsupported:
            if self._budget < 0:
                raise
            result = UNKNOWN
        finally:
            self._stack.pop()
        if fn.wrapper is not None:  # custom_jvp/custom_vjp: the body runs inside a custom-derivative call
            result = after_each(result, "compute", fn.wrapper, node)
        return result

    def _bind(self, fn: Function, args: list, kwargs: dict) -> dict | None:
        params = fn.node.params
        positional = [*params.posonly_params, *params.params]
        env: dict[str, Any] = {}
        for param, value in zip(positional, args):
            env[param.name.value] = value
        extra = args[len(positional) :]
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

    def forget_changed_instances(self, callee: Any, node: cst.Call, scope: Frame) -> None:
        """Objects of the project's classes held by local names, whose attributes the call may
        set (a method setting ``self.x``, a helper setting ``arg.x``): unknown after it."""
        held: list = []
        if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name):
            held.append(node.func.value.value)
        held += [arg.value.value for arg in node.args if isinstance(arg.value, cst.Name)]
        for name in held:
            if isinstance(scope.env.get(name), Instance) and not self._keeps_attributes(callee):
                self.forget_aliases(scope.env[name], scope)
                scope.env[name] = UNKNOWN

    def _keeps_attributes(self, callee: Any) -> bool:
        """Whether a call leaves the attributes of the objects it is passed alone: a modelled
        JAX API, or a function of the project that changes none of its parameters."""
        if isinstance(callee, Bound):
            callee = callee.fn
        if isinstance(callee, Function):
            changes = self._changes_parameters.get(callee.node)
            if changes is None:
                changes = self._changes_parameters[callee.node] = sets_parameter_attributes(callee.node)
            return not changes
        return isinstance(callee, (Ref, Differentiated, Jitted, Transform, ReplaceMethod, DataclassType))

    def instance_member(self, instance: Instance, name: str, node: Any) -> Any:
        """A method of an object's class (bound to it), a property's value, or ``replace``."""
        cls = instance.cls
        entry = cls.method(name) if isinstance(cls, DataclassType) else None
        if entry is None:
            if name in ("replace", "_replace") and isinstance(cls, DataclassType) and not cls.plain:
                return ReplaceMethod(instance)  # flax.struct/chex dataclasses, NamedTuple._replace
            return UNKNOWN
        _, how, method = entry
        if how == "property":
            return self.inline(method, [instance], {}, node)
        return method if how == "static" else Bound(method, (instance,), ())

    def construct(self, cls: DataclassType, args: list, kwargs: dict, node: Any) -> Any:
        """An instance of a class of the project: a dataclass's from its fields, a plain
        class's from what its ``__init__`` sets on ``self``."""
        if not cls.plain:
            return UNKNOWN if cls.method("__post_init__") else jax_api.instantiate(cls.fields, args, kwargs, cls)
        instance = Instance(cls.fields, cls)
        entry = cls.method("__init__")
        if entry is None or entry[1] != "self":
            return UNKNOWN if entry is not None or args or kwargs else instance
        init = entry[2]
        params = [*init.node.params.posonly_params, *init.node.params.params]
        if not params:
            return UNKNOWN
        name = params[0].name.value
        env: dict = {}
        self.inline(init, [instance, *args], kwargs, node, env)
        built = env.get(name)
        return built if isinstance(built, Instance) else UNKNOWN

    def class_value(self, node: cst.ClassDef, scope: Any, closure: StaticScope) -> Any:
        """A ``@dataclass`` (a configuration object, or state registered as a pytree), a
        ``NamedTuple``, or a plain class without bases or decorators: its fields and their
        defaults, so that ``Config().offload`` is the default the program runs with and
        ``state.moment`` the field it was given, and its methods. Any other class is unknown."""
        written = [
            (d.decorator, value)
            for d in node.decorators
            if not (
                isinstance(value := self.ev(d.decorator, scope), Ref) and value.qualname in names.PYTREE_REGISTRATIONS
            )
        ]
        bases = [self.ev(arg.value, scope) for arg in node.bases]
        named_tuple = not written and any(isinstance(b, Ref) and b.qualname in names.NAMED_TUPLE for b in bases)
        plain = not node.decorators and not node.keywords and all(b == Ref("builtins.object") for b in bases)
        if named_tuple or plain:
            pass
        elif len(written) != 1:
            return UNKNOWN
        elif isinstance(written[0][1], Ref) and written[0][1].qualname in names.DATACLASS:
            pass
        elif not (isinstance(written[0][0], cst.Call) and self._is_dataclass_call(written[0][0], scope)):
            return UNKNOWN
        node = closure.class_body(node)
        if node is None:
            return UNKNOWN
        body = block_statements(node.body)
        class_scope = StaticScope(self, body, closure, is_class=True)
        fields, methods = [], []
        for index, statement in enumerate(body):
            if isinstance(statement, cst.FunctionDef):
                how = self._method_kind(statement, class_scope.at(index))
                if how is not None:
                    methods.append((statement.name.value, how, Function(statement, class_scope.closure)))
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    default = (
                        UNKNOWN if small.value is None else self._field_default(small.value, class_scope.at(index))
                    )
                    if not plain or small.value is not None:
                        fields.append((small.target.value, default))
                elif plain and isinstance(small, cst.Assign) and isinstance(small.targets[0].target, cst.Name):
                    fields.append((small.targets[0].target.value, self.ev(small.value, class_scope.at(index))))
        return DataclassType(tuple(fields), tuple(methods), plain)

    def _method_kind(self, node: cst.FunctionDef, scope: Any) -> str | None:
        """How a method is reached from an instance: ``self``, ``static``, ``property``; None
        for any other decorator (or an ``async def``)."""
        if node.asynchronous is not None or len(node.decorators) > 1:
            return None
        if not node.decorators:
            return "self"
        decorator = self.ev(node.decorators[0].decorator, scope)
        if isinstance(decorator, Ref) and decorator.qualname in (names.STATICMETHOD, names.PROPERTY):
            return "static" if decorator.qualname == names.STATICMETHOD else "property"
        return None

    def _field_default(self, node: Any, scope: Any) -> Any:
        if isinstance(node, cst.Call):
            callee = self.ev(node.func, scope)
            if isinstance(callee, Ref) and callee.qualname in names.DATACLASS_FIELD:
                for arg in node.args:
                    if arg.keyword is not None and arg.keyword.value == "default":
                        return self.ev(arg.value, scope)
                return UNKNOWN
        return self.ev(node, scope)

    def _is_dataclass_call(self, node: cst.Call, scope: Any) -> bool:
        """``@dataclass(frozen=True)`` and the like."""
        callee = self.ev(node.func, scope)
        return isinstance(callee, Ref) and callee.qualname in names.DATACLASS
