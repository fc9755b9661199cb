"""Fixes compiled before they are written: the fixed source lowered again and judged by XLA.

``run --fix --confirm`` knows each checked compilation's function and its arguments as shapes
and shardings (``report_file.AbstractCall``). The fixed text of the function's file is written to
a temporary file beside it (so its imports and relative paths resolve as they do for the
original), imported as a fresh module — not as ``__main__``, so a script's ``main()`` does not
run — and the function, with the jit options the fixed source gives it, is lowered for the
target with the same arguments and compiled. A fix is confirmed when XLA compiles the result.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from offload_fixer.model import FunctionRef, MemoryFigures, XlaVerdict

_names = itertools.count()


@dataclass(frozen=True)
class FixCheck:
    confirmed: bool
    reason: str
    """Why the fix is refused (or what XLA said when it compiled it: empty)."""
    verdict: XlaVerdict | None = None
    located: bool = True
    """The fixed function was found and imported (else nothing was lowered)."""
    lowered: bool = True
    """The fixed function lowered (a refusal with ``lowered`` is the compiler's)."""


def compile_fixed(
    path: str,
    fixed_text: str,
    function: FunctionRef,
    args: tuple,
    kwargs: dict,
    target: str,
    compile: bool = True,
    host_outputs: Sequence[int] = (),
) -> FixCheck:
    """Lower ``function`` from ``fixed_text`` (the new contents of ``path``) and, with
    ``compile``, compile it. Lowering needs JAX only: a fix whose ``out_shardings`` does not
    fit the returned pytree, or whose edit no longer traces, fails here. ``host_outputs``: the
    outputs declared host memory before compiling (those of findings this text leaves unfixed,
    so that XLA judges the rest, as ``--confirm`` does)."""
    from offload_fixer.xla.confirm import with_host_output
    from offload_fixer.xla.oracle import judge, module_text

    with _imported(path, fixed_text) as module:
        if isinstance(module, Exception):
            return FixCheck(
                False,
                f"the fixed file could not be imported to compile it: {type(module).__name__}: {module}",
                located=False,
                lowered=False,
            )
        jitted = find_jitted(module, function)
        if jitted is None:
            return FixCheck(
                False,
                f"`{function.name}` is not a module-level function of the fixed file",
                located=False,
                lowered=False,
            )
        try:
            lowered = lower_fixed(jitted, module, args, kwargs, target)
        except Exception as exc:  # noqa: BLE001
            return FixCheck(
                False, f"the fixed `{function.name}` no longer lowers: {type(exc).__name__}: {exc}", lowered=False
            )
    if not compile:
        return FixCheck(True, "")
    text = module_text(lowered)
    for index in host_outputs:
        text = with_host_output(text, index)
    verdict = judge(text, target)
    if verdict.outcome == "compiled":
        return FixCheck(True, "", verdict)
    from offload_fixer.xla_messages import summary

    said = summary(verdict.message) or verdict.outcome
    return FixCheck(False, f"{verdict.compiler} still rejects the fixed `{function.name}`: {said}", verdict)


def original_memory(
    path: str, text: str, function: FunctionRef, args: tuple, kwargs: dict, target: str, host_outputs: Sequence[int]
) -> MemoryFigures | None:
    """The memory figures of ``function`` as ``text`` (the unfixed file) has it, with the outputs
    error 1200 names declared host memory (the program XLA accepts unchanged, as ``--confirm``
    compiles it): what a fix's figures are compared with. ``None`` where XLA rejects even that."""
    check = compile_fixed(path, text, function, args, kwargs, target, host_outputs=host_outputs)
    return check.verdict.memory if check.verdict is not None else None


@contextmanager
def _imported(path: str, text: str) -> Iterator[Any]:
    """``text`` written to a temporary file beside ``path`` and imported as a fresh module
    (its imports and relative paths resolve as the original's do); the exception instead
    where the import fails. Removed again on exit."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".offload-fixer-confirm-", suffix=".py", dir=directory)
    name = f"_offload_fixer_fixed_{next(_names)}"
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        try:
            module: Any = _import(name, temporary, directory)
        except Exception as exc:  # noqa: BLE001 - the user's module may fail to import here
            module = exc
        yield module
    finally:
        sys.modules.pop(name, None)
        try:
            os.unlink(temporary)
        except OSError:
            pass


def import_safe(text: str) -> bool:
    """Whether importing ``text`` only defines things: imports, definitions, assignments and an
    ``if __name__ == "__main__":`` block, so lowering a fix by importing the fixed file does not
    run the user's program again (a script that trains at module level is not imported)."""
    import ast

    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            continue
        return False
    return True


def lower_fixed(jitted: Any, module: Any, args: tuple, kwargs: dict, target: str) -> Any:
    """``jitted`` (from the fixed ``module``) lowered for ``target`` with the recorded arguments,
    their dataclass and NamedTuple nodes rebuilt from the fixed module's classes of the same
    name: the recorded ones belong to the original module, whose pytree types JAX compares by
    identity with the ``in_shardings`` the fixed module builds."""
    from offload_fixer import jax_compat

    args, kwargs = rehome((args, kwargs), module)
    return jax_compat.lower_for_platform(jitted, args, kwargs, jax_compat.lowering_platform(target))


def rehome(value: Any, module: Any) -> Any:
    """``value`` with each dataclass or NamedTuple whose class ``module`` also defines (by
    qualified name, a class of another module) rebuilt as an instance of ``module``'s class."""
    kind = type(value)
    own = _same_class(kind, module)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (own or kind)(*(rehome(v, module) for v in value))
    if isinstance(value, (tuple, list)):
        return kind(rehome(v, module) for v in value)
    if isinstance(value, dict):
        return {k: rehome(v, module) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: rehome(getattr(value, f.name), module) for f in dataclasses.fields(value)}
        built: Any = object.__new__(own or kind)
        for name, field_value in changes.items():
            object.__setattr__(built, name, field_value)
        return built
    return value


def _same_class(kind: type, module: Any) -> type | None:
    found: Any = module
    for part in kind.__qualname__.split("."):
        found = getattr(found, part, None)
        if found is None:
            return None
    return found if isinstance(found, type) and found is not kind else None


def _import(name: str, path: str, directory: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    added = directory not in sys.path
    if added:
        sys.path.insert(0, directory)
    try:
        spec.loader.exec_module(module)
    finally:
        if added:
            sys.path.remove(directory)
    return module


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
