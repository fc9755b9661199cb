"""Fixes compiled before they are written: the fixed source lowered again and judged by XLA.

``run --fix --confirm`` knows each checked compilation's function and its arguments as shapes
and shardings (``report_file.AbstractCall``). The fixed text of the function's file is written to
a temporary file beside it (so its imports and relative paths resolve as they do for the
original), imported as a fresh module — not as ``__main__``, so a script's ``main()`` does not
run — and the function, with the jit options the fixed source gives it, is lowered for the
target with the same arguments and compiled. A fix is confirmed when XLA compiles the result.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from offload_fixer.model import FunctionRef, XlaVerdict

_names = itertools.count()


@dataclass(frozen=True)
class FixCheck:
    confirmed: bool
    reason: str
    """Why the fix is refused (or what XLA said when it compiled it: empty)."""
    verdict: XlaVerdict | None = None


def compile_fixed(
    path: str, fixed_text: str, function: FunctionRef, args: tuple, kwargs: dict, target: str
) -> FixCheck:
    """Lower ``function`` from ``fixed_text`` (the new contents of ``path``) and compile it."""
    from offload_fixer import jax_compat
    from offload_fixer.xla.oracle import judge

    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".offload-fixer-confirm-", suffix=".py", dir=directory)
    name = f"_offload_fixer_fixed_{next(_names)}"
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(fixed_text)
        try:
            module = _import(name, temporary, directory)
            jitted = _find_jitted(module, function)
        except Exception as exc:  # noqa: BLE001 - the user's module may fail to import here
            return FixCheck(False, f"the fixed file could not be imported to compile it: {type(exc).__name__}: {exc}")
        if jitted is None:
            return FixCheck(False, f"`{function.name}` is not a module-level function of the fixed file")
        try:
            lowered = jax_compat.lower_for_platform(jitted, args, kwargs, jax_compat.lowering_platform(target))
        except Exception as exc:  # noqa: BLE001
            return FixCheck(False, f"the fixed `{function.name}` no longer lowers: {type(exc).__name__}: {exc}")
        verdict = judge(lowered, target)
        if verdict.outcome == "compiled":
            return FixCheck(True, "", verdict)
        from offload_fixer.xla_messages import summary

        said = summary(verdict.message) or verdict.outcome
        return FixCheck(False, f"{verdict.compiler} still rejects the fixed `{function.name}`: {said}", verdict)
    finally:
        sys.modules.pop(name, None)
        try:
            os.unlink(temporary)
        except OSError:
            pass


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


def _find_jitted(module: Any, function: FunctionRef) -> Any:
    """The module's jitted object for ``function``: the name itself when it is jitted there,
    else the module-level jit of a function of that name (``step = jax.jit(train_step, ...)``)."""
    from offload_fixer.api import is_jitted, python_function

    direct = getattr(module, function.name, None)
    if direct is not None and is_jitted(direct):
        return direct
    for value in vars(module).values():
        if is_jitted(value) and getattr(python_function(value), "__name__", None) == function.name:
            return value
    return None
