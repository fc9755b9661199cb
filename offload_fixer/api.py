"""Python API: ``offload_fixer.check(fn, *args)`` lowers one function for an accelerator and
reports what XLA's host offloader would do with it, on any machine (CPU included)."""

from __future__ import annotations

import ast
import contextlib
import contextvars
import functools
import inspect
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from offload_fixer.model import FunctionRef, Report
from offload_fixer.source.lookup import is_interactive, source_bytes

if TYPE_CHECKING:
    from offload_fixer.topology import Topology

__all__ = ["check", "function_ref", "is_jitted", "pod", "python_function"]


def check(
    fn: Callable[..., Any],
    *args: Any,
    target: str = "tpu",
    confirm: bool = False,
    topology: str | Topology | None = None,
    **kwargs: Any,
) -> Report:
    """Analyse ``fn(*args, **kwargs)`` as it would compile for ``target`` (tpu or gpu).

    ``fn`` is a plain function or a ``jax.jit``-wrapped one; a jitted function keeps its own
    ``in_shardings``, ``out_shardings``, ``donate_argnums`` and static arguments. Arguments
    may be arrays, NumPy arrays or ``jax.ShapeDtypeStruct``s (with shardings): nothing runs,
    the function is only traced and lowered. The keyword ``target`` is taken by ``check``;
    a function with its own ``target`` parameter receives it positionally, and so for
    ``confirm`` and ``topology``: with ``confirm=True`` the released compiler of the target
    (libtpu, JAX's CUDA plugin) compiles the module too, and each diagnostic says whether it
    agrees (``Diagnostic.confirmed``, ``Report.xla``); without that compiler installed it
    raises :class:`offload_fixer.xla.CompilerUnavailable`, whose message gives the install
    command. ``topology``: the TPU pod (``"v5e-256"``) the module is compiled for with
    ``confirm``; inside :func:`pod`, that block's pod.
    """
    from offload_fixer import jax_compat
    from offload_fixer.analysis import analyze
    from offload_fixer.model import normalize_target
    from offload_fixer.topology import parse_topology

    target = normalize_target(target)
    try:
        lowered, policies = jax_compat.lower_with_policies(fn, args, kwargs, jax_compat.lowering_platform(target))
    except ValueError as error:  # JAX's refusal to trace mixed memory spaces is a finding
        from offload_fixer.trace_refusals import refusal_report

        refused = refusal_report(error, fn, args, kwargs, target, python_function(fn), function_ref(fn))
        if refused is None:
            raise
        return refused
    report = analyze(lowered, target=target, function=function_ref(fn), remat_policies=policies)
    if confirm:
        from offload_fixer import xla
        from offload_fixer.xla.confirm import confirm as confirm_report

        chosen = parse_topology(topology) if isinstance(topology, str) else topology or _current_pod.get()
        report = confirm_report(report, lowered, xla.oracle(target, chosen))
    return report


_current_pod: contextvars.ContextVar[Topology | None] = contextvars.ContextVar("offload_fixer_pod", default=None)


@contextlib.contextmanager
def pod(topology: str, num_slices: int = 1) -> Iterator[Topology]:
    """Inside the block, JAX answers as process 0 of the TPU pod ``topology`` names
    (``"v5e-256"``, ``"v5p:4x4x8"``; ``num_slices`` of it): ``jax.devices()`` are its
    compile-only devices, so a mesh and shardings built there are the pod's, and :func:`check`
    confirms for it. Needs libtpu (``jax[tpu]``); raises
    :class:`~offload_fixer.topology.UnknownTopology` for a name it cannot read and
    :class:`~offload_fixer.jax_compat.pod.PodUnavailable` where libtpu cannot build it."""
    from offload_fixer.jax_compat import pod as jax_pod
    from offload_fixer.topology import parse_topology

    chosen = parse_topology(topology, num_slices)
    token = _current_pod.set(chosen)
    try:
        with jax_pod.pod_view(jax_pod.start(chosen)):
            yield chosen
    finally:
        _current_pod.reset(token)


def is_jitted(fn: Any) -> bool:
    """A ``jax.jit`` result (or anything standing in for one): it traces by itself."""
    return callable(fn) and callable(getattr(fn, "trace", None)) and callable(getattr(fn, "lower", None))


def function_ref(fn: Any) -> FunctionRef | None:
    """Where the Python function behind ``fn`` is defined (through jit, ``functools.wraps``
    and ``functools.partial``), so fixes can find its ``def``; ``None`` when it has no source."""
    target = python_function(fn)
    code = getattr(target, "__code__", None)
    if code is None:
        name = getattr(fn, "__name__", None) or type(fn).__name__
        return FunctionRef(name=name)
    name = getattr(target, "__name__", code.co_name)
    path = code.co_filename
    if not path or (path.startswith("<") and not is_interactive(path)):
        return FunctionRef(name=name)
    path = path if is_interactive(path) else os.path.abspath(path)
    return FunctionRef(name=name, path=path, line=_def_line(path, code.co_firstlineno, code.co_name))


def python_function(fn: Any) -> Any:
    seen: set[int] = set()
    while id(fn) not in seen:
        seen.add(id(fn))
        if isinstance(fn, functools.partial):
            fn = fn.func
            continue
        wrapped = getattr(fn, "__wrapped__", None)
        if wrapped is not None:
            fn = wrapped
            continue
        if inspect.ismethod(fn):
            fn = fn.__func__
            continue
        if not hasattr(fn, "__code__") and not inspect.isroutine(fn):
            call = type(fn).__call__ if callable(fn) else None  # an instance of a class with __call__
            if hasattr(call, "__code__"):
                return call
        break
    return fn


def _def_line(path: str, first_line: int, name: str) -> int:
    """``co_firstlineno`` is the first decorator's line; fixes want the ``def`` line itself."""
    for node in _function_nodes(path, _mtime(path)):
        decorators = getattr(node, "decorator_list", [])
        start = decorators[0].lineno if decorators else node.lineno
        if start == first_line and getattr(node, "name", "<lambda>") == name:
            return node.lineno
    return first_line


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


@functools.lru_cache(maxsize=64)
def _function_nodes(path: str, mtime: float) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, ...]:
    data = source_bytes(path)
    if data is None:
        return ()
    try:
        tree = ast.parse(data, filename=path)
    except (SyntaxError, ValueError):
        return ()
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    return tuple(node for node in ast.walk(tree) if isinstance(node, kinds))
