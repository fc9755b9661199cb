"""Where a fixed function is jitted: the fixed source's own jit (a decorator, a module-level
``step = jax.jit(train_step, ...)``, a module-level object's jitted attribute), else the options
the run recorded, with the ``in_shardings``/``out_shardings`` the fixed jit call spells evaluated
where that call is written (a jit built inside ``main()``)."""

from __future__ import annotations

import ast
import os
import types
from collections.abc import Mapping
from typing import Any

from offload_fixer.model import FunctionRef
from offload_fixer.verify.fixed_modules import Unverifiable


def find_jitted(module: Any, function: FunctionRef) -> Any:
    """The module's jitted object for ``function``: the name itself when it is jitted there,
    else the module-level jit of a function of that name (``step = jax.jit(train_step, ...)``),
    else such a jit held by a module-level object (``TRAINER.step``)."""
    from offload_fixer.api import is_jitted, python_function

    direct = getattr(module, function.name, None)
    if direct is not None and is_jitted(direct):
        return direct

    def named(value: Any) -> bool:
        return is_jitted(value) and getattr(python_function(value), "__name__", None) == function.name

    values = list(vars(module).values())
    for value in values:
        if named(value):
            return value
    for value in values:  # a module-level object's jitted attribute: ``self.step = jax.jit(self.update)``
        if not isinstance(value, type) and not callable(value) and hasattr(value, "__dict__"):
            for attribute in vars(value).values():
                if named(attribute):
                    return attribute
    return None


def jit_options_at_site(
    function: FunctionRef,
    call: Any,
    before: str | None,
    after: str | None,
    names: Mapping[str, Any],
) -> dict[str, Any]:
    """The options to jit the fixed ``function`` with where the program built its jit inside a
    function (``main()``): those the run recorded (``call.jit_options``), with each of
    ``in_shardings``/``out_shardings`` the fixed jit call (in the site's text ``after``) spells
    otherwise than the original one (``before``) evaluated with ``names`` (the site module's
    namespace) and the names the original call's ``in_shardings`` binds to the recorded
    shardings (``in_shardings=(state_sh, ...)``: ``state_sh``)."""
    where = f"{os.path.basename(function.jit_path or function.path or '')}:{function.jit_line}"
    options = dict(call.jit_options) if getattr(call, "jit_options", None) is not None else None
    if options is None:  # a saved report (``fix REPORT``) does not keep them
        raise Unverifiable(f"the jit at {where} is built inside a function, and the record holds no jit options")
    if before is None or after is None or before == after:
        return options
    try:
        original = jit_call(ast.parse(before), function)
        fixed = jit_call(ast.parse(after), function)
    except SyntaxError:
        original = fixed = None
    if fixed is None or original is None:
        if _statement_at(before, function.jit_line) in _statements(after):
            return options  # the statement that builds the jit is as it was
        raise Unverifiable(f"no `jax.jit({function.name}, ...)` call found at {where}")
    scope = dict(names)
    recorded_in = options.get("in_shardings")
    written_in = _keyword(original, "in_shardings", 1)
    if recorded_in is not None and written_in is not None:
        scope.update(_bindings(written_in, recorded_in))
    path = function.jit_path or function.path or "<fixed>"
    for option, position in (("in_shardings", 1), ("out_shardings", 2)):
        expression = _keyword(fixed, option, position)
        previous = _keyword(original, option, position)
        if expression is None or (
            previous is not None and ast.dump(previous) == ast.dump(expression) and option in options
        ):
            continue
        try:
            options[option] = eval(compile(ast.Expression(expression), path, "eval"), scope)
        except Exception as exc:  # noqa: BLE001
            raise Unverifiable(
                f"the jit at {where} is built inside a function; its {option} "
                f"`{ast.unparse(expression)}` needs the running program ({type(exc).__name__}: {exc})"
            ) from None
    return options


def _statements(text: str) -> list[str]:
    return [ast.dump(statement) for statement in ast.parse(text).body]


def _statement_at(text: str, line: int | None) -> str | None:
    """The ``ast`` dump of the top-level statement of ``text`` that holds ``line``."""
    for statement in ast.parse(text).body:
        first = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))])
        if line is not None and first <= line <= (statement.end_lineno or statement.lineno):
            return ast.dump(statement)
    return None


def jit_call(tree: Any, function: FunctionRef) -> Any:
    """The ``jax.jit(NAME, ...)`` call of ``function`` nearest its recorded jit line."""
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (ast.unparse(node.func) in ("jax.jit", "jit"))
        and node.args
        and ast.unparse(node.args[0]).split(".")[-1] == function.name.rsplit(".", 1)[-1]
    ]
    return min(calls, key=lambda c: abs(c.lineno - (function.jit_line or 0)), default=None)


def _keyword(call: Any, name: str, position: int) -> Any:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return call.args[position] if len(call.args) > position else None


def _bindings(expression: Any, value: Any) -> dict[str, Any]:
    """Each name of a tuple/list/dict literal ``expression`` bound to its part of ``value``."""
    if isinstance(expression, ast.Name):
        return {expression.id: value}
    found: dict[str, Any] = {}
    if isinstance(expression, (ast.Tuple, ast.List)) and isinstance(value, (tuple, list)):
        for part, sub in zip(expression.elts, value):
            found.update(_bindings(part, sub))
    elif isinstance(expression, ast.Dict) and isinstance(value, dict):
        for key, part in zip(expression.keys, expression.values):
            if isinstance(key, ast.Constant) and key.value in value:
                found.update(_bindings(part, value[key.value]))
    return found


def from_factory(module: Any, function: FunctionRef, call: Any) -> Any:
    """``function`` as an imported fixed module builds it where the program jits what a factory
    returns (``jax.jit(make_eval_step(config), ...)`` inside ``main()``): the fixed module's
    code of the inner ``def`` with the closure of the function the run jitted (its ``config``),
    where the free variables are the same. None where the run holds no such function, or the
    fixed code's free variables differ from it."""
    from offload_fixer.api import python_function

    recorded = python_function(getattr(call, "fun", None))
    code = getattr(recorded, "__code__", None)
    if code is None or code.co_name != function.name.rsplit(".", 1)[-1]:
        return None
    if getattr(module, code.co_name, None) is not None:
        return None  # defined at module level: not a factory's (found, or refused, as such)

    def inner(codes: Any, depth: int = 0) -> Any:
        for const in codes:
            if isinstance(const, types.CodeType):
                if const.co_name == code.co_name and const.co_freevars == code.co_freevars:
                    return const
                found = inner(const.co_consts, depth + 1) if depth < 3 else None
                if found is not None:
                    return found
        return None

    makers = [getattr(v, "__code__", None) for v in vars(module).values() if isinstance(v, types.FunctionType)]
    fixed = inner([m for m in makers if m is not None])
    if fixed is None:
        return None
    rebuilt = types.FunctionType(fixed, vars(module), code.co_name, recorded.__defaults__, recorded.__closure__)
    rebuilt.__kwdefaults__ = recorded.__kwdefaults__
    return rebuilt
