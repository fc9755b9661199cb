"""A fixed function rebuilt where the program ran it: its new source executed in a copy of its
module's namespace, with the closure the run recorded, never by importing the module again.

``run`` holds each checked compilation's Python function (``AbstractCall.fun``), and with it
the namespace the program built (``fun.__globals__``: the mesh, the shardings, the parameters
it loaded). A fix changes a few top-level statements of that module; those alone are executed,
in order, in a shallow copy of the namespace: the imports it adds, the ``def`` and ``class``
statements it edits, and the assignments it edits (a module-level ``step = jax.jit(...)``).
The program itself (a training loop at module level, ``main()``) is never run again, so a
script with statements at module level is verified like a module. The functions the module
defined are rebound to the copy, so an unchanged caller of an edited helper calls the fixed
helper. A function defined inside another (a jit built in ``main()``, a factory's closure) is
the fixed file's code object of the same qualified name, given the recorded closure. Its jit is
the fixed source's (a decorator, a module-level jit) or the recorded options, with the options
the fixed jit call spells evaluated in the copy (:func:`~offload_fixer.verify.lowering.jit_at_site`).
"""

from __future__ import annotations

import ast
import inspect
import os
import types
from collections import Counter
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from offload_fixer.verify.fixed_modules import Unverifiable

DEFINING = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
"""The top-level statements a fix may change that are executed again in the copy: they define
names, and run nothing of the program (a changed assignment is one the fix edited)."""


class FixedNamespace(types.SimpleNamespace):
    """The copy of a module's namespace with the fixed statements executed in it, read as a
    module (``getattr``) by the lowering; ``values`` is the dictionary itself."""

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__()
        self.__dict__.update(values)


def recorded_function(fun: Any) -> Any:
    """The Python function a recorded jit wraps, through ``partial``, ``functools.wraps`` and
    bound methods (``jax.jit(self.update)``)."""
    from offload_fixer.api import python_function

    return python_function(fun)


def has_namespace(fun: Any, path: str, parts: Collection[str] = ()) -> bool:
    """Whether ``fun`` is a live function of the file ``path`` (or of one of its ``parts``: the
    cells of a kernel's program), whose module namespace the fix can be executed in (a saved
    report's call holds none)."""
    found = recorded_function(fun) if fun is not None else None
    code = getattr(found, "__code__", None)
    return (
        code is not None
        and isinstance(getattr(found, "__globals__", None), dict)
        and (_same_file(code.co_filename, path) or code.co_filename in parts)
    )


def _same_file(filename: str, path: str) -> bool:
    return filename == path or (not filename.startswith("<") and os.path.abspath(filename) == os.path.abspath(path))


def changed_statements(before: str, after: str) -> list[ast.stmt]:
    """The top-level statements of ``after`` that ``before`` does not hold as they are (by
    their ``ast`` dump, as many times as it holds each), in ``after``'s order."""
    old = Counter(ast.dump(statement) for statement in ast.parse(before).body)
    changed = []
    for statement in ast.parse(after).body:
        dump = ast.dump(statement)
        if old[dump] > 0:
            old[dump] -= 1
        else:
            changed.append(statement)
    return changed


@contextmanager
def fixed_namespace(fun: Any, path: str, before: str, after: str) -> Iterator[FixedNamespace]:
    """The namespace of ``fun``'s module (the file ``path``, analysed as ``before``) as the fixed
    text ``after`` defines it: a shallow copy with the statements the fix changed executed
    again, the module's own functions rebound to the copy. Raises :class:`Unverifiable` where
    the fix changes a statement that would run the program, or a changed statement fails."""
    recorded = recorded_function(fun)
    original: dict[str, Any] = recorded.__globals__
    values = dict(original)
    try:
        changed = changed_statements(before, after)
    except SyntaxError as exc:
        raise Unverifiable(f"the fixed {os.path.basename(path)} does not parse: {exc}") from None
    executed: set[str] = set()
    for statement in changed:
        if _runs_as_program(statement):
            continue  # its jit sites are read from the fixed text (``jit_at_site``)
        if not isinstance(statement, DEFINING):
            raise Unverifiable(
                f"the fix changes module-level code that runs the program (line {statement.lineno} of "
                f"{os.path.basename(path)})"
            )
        try:
            exec(compile(ast.Module([statement], []), path, "exec"), values)
        except BaseException as exc:  # noqa: BLE001 - the user's statement may fail (or exit)
            raise Unverifiable(
                f"the fixed line {statement.lineno} of {os.path.basename(path)} fails: {type(exc).__name__}: {exc}"
            ) from None
        executed.update(_bound_names(statement))
    _rebind(values, original, executed)
    yield FixedNamespace(values)


def _runs_as_program(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.If) and "__name__" in ast.unparse(statement.test)


def _bound_names(statement: ast.stmt) -> Iterator[str]:
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield statement.name
    elif isinstance(statement, (ast.Import, ast.ImportFrom)):
        for alias in statement.names:
            yield (alias.asname or alias.name).split(".")[0]
    else:
        targets = statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
        for target in targets:
            for node in ast.walk(target) if target is not None else ():
                if isinstance(node, ast.Name):
                    yield node.id


def _rebind(values: dict[str, Any], original: dict[str, Any], executed: set[str]) -> None:
    """Each function the module defined (and each module-level jit of one) that the fix did not
    define again, rebound to the copy ``values``: an unchanged caller then calls the fixed
    helper, a module-level ``step = jax.jit(train_step)`` jits the fixed ``train_step``."""
    from offload_fixer.api import is_jitted
    from offload_fixer.jax_compat import tracing as jax_tracing

    for name, value in list(values.items()):
        if name in executed:
            continue
        if isinstance(value, types.FunctionType) and value.__globals__ is original:
            values[name] = rebound(value, values)
        elif is_jitted(value):
            inner = recorded_function(value)
            if not (isinstance(inner, types.FunctionType) and inner.__globals__ is original):
                continue
            options = jax_tracing.jit_options(value)
            if options is None:
                continue
            fresh = values.get(inner.__name__) if inner.__name__ in executed else None
            target = fresh if isinstance(fresh, types.FunctionType) else rebound(inner, values)
            import jax

            values[name] = jax.jit(target, **options)


def rebound(function: types.FunctionType, values: dict[str, Any], code: types.CodeType | None = None) -> Any:
    """``function`` (or ``code`` with its defaults and closure) with ``values`` as its globals."""
    copy = types.FunctionType(
        code or function.__code__, values, function.__name__, function.__defaults__, function.__closure__
    )
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__qualname__ = function.__qualname__
    copy.__module__ = function.__module__
    copy.__dict__.update(function.__dict__)
    return copy


def fixed_callable(fun: Any, namespace: FixedNamespace, path: str, after: str) -> tuple[Any, bool]:
    """(the callable the program jitted, as the fixed source defines it in ``namespace``; whether
    it is already jitted there, with the fixed source's own options). A module-level function
    or a class's method is read from the namespace; a function defined inside another is the
    fixed text's code object of the same qualified name with the recorded closure, where its
    free variables are the same. ``partial`` arguments and a bound method's instance are kept."""
    recorded = recorded_function(fun)
    qualname: str = recorded.__qualname__
    values = vars(namespace)
    if "<locals>" not in qualname:
        found: Any = values.get(qualname.split(".")[0])
        for part in qualname.split(".")[1:]:
            found = getattr(found, part, None)
        from offload_fixer.api import is_jitted

        if found is None:
            raise Unverifiable(f"`{qualname}` is not defined in the fixed {os.path.basename(path)}")
        if "." not in qualname and is_jitted(found) and fun is not found and not _wrapped(fun):
            return found, True
        function = recorded_function(found)
    else:
        code = _code_named(compile(after, path, "exec"), recorded.__code__)
        if code is None:
            raise Unverifiable(
                f"`{qualname}` is defined inside another function, and the fixed {os.path.basename(path)} "
                "defines none of that name with the same free variables"
            )
        function = rebound(recorded, values, code)
    return _rewrapped(fun, function), False


def _wrapped(fun: Any) -> bool:
    import functools

    return isinstance(fun, functools.partial) or inspect.ismethod(fun)


def _rewrapped(fun: Any, function: Any) -> Any:
    """``function`` in the place of the recorded one inside ``fun``: the same ``partial``
    arguments, bound to the same instance."""
    import functools

    if isinstance(fun, functools.partial):
        return functools.partial(_rewrapped(fun.func, function), *fun.args, **fun.keywords)
    if inspect.ismethod(fun):
        return types.MethodType(function, fun.__self__)
    return function


def _code_named(module: types.CodeType, wanted: types.CodeType) -> types.CodeType | None:
    """The code object in ``module`` (at any depth) with ``wanted``'s qualified name and free
    variables."""
    name = getattr(wanted, "co_qualname", wanted.co_name)
    stack = [module]
    while stack:
        code = stack.pop()
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                if getattr(const, "co_qualname", const.co_name) == name and const.co_freevars == wanted.co_freevars:
                    return const
                stack.append(const)
    return None


def instance_names(fun: Any) -> Mapping[str, Any]:
    """The names a jit call inside a method reads its instance by (``self``)."""
    return {"self": fun.__self__} if inspect.ismethod(fun) else {}
