"""JAX's refusals while it traces a jitted function, said as diagnostics (OFL1215).

From JAX 0.7.1 the memory space is part of an array's type, and JAX refuses an operation whose
operands live in host and device memory before anything is lowered (``ValueError: memory_space
of all inputs passed to `dot_general` must be the same``): there is no module for the analysis
to read. The common way in is a committed ``pinned_host`` array passed to the function
(parameters restored to host, then a jitted step that reads them). ``run`` and the Python API
name that argument, the line of the user's code where JAX refused it, and the move that fixes
it; JAX stops at the first refusal, so the function is traced again with each refused argument
typed device memory, to name the next one too.
"""

from __future__ import annotations

import itertools
import os
import re
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from offload_fixer.model import PINNED_HOST, Diagnostic, FunctionRef, Origin, Report, Span

MAX_REFUSALS = 32
"""How many refused arguments one function is traced again for, at most."""
_HOST_OPERAND = re.compile(r"(\w+)<host>\[([\d, ]*)\]")
"""The host operand's type in JAX's refusal: ``float32<host>[8,4]``."""


@dataclass(frozen=True)
class _Argument:
    label: str
    """JAX's label of the leaf: ``params['w']``."""
    index: int
    """The leaf's position among the flat arguments."""
    value: Any
    memory_kind: str


def refusal_report(
    error: BaseException,
    fn: Any,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    target: str,
    defined: Any,
    function: FunctionRef | None,
    called_at: Span | None = None,
) -> Report | None:
    """The report of JAX's refusal ``error`` to trace ``fn(*args, **kwargs)``, or ``None`` where
    ``error`` is no refusal of mixed memory spaces. ``defined``: the Python function behind
    ``fn`` (``api.python_function``), whose parameters name the arguments; ``called_at``: where
    the user's code called ``fn``, where ``error``'s traceback does not reach that far (it was
    caught on the way up)."""
    from offload_fixer import jax_compat

    if jax_compat.mixed_memory_space_refusal(error) is None:
        return None
    import jax

    leaves, tree = jax.tree_util.tree_flatten((tuple(args), dict(kwargs)))
    hosts = _host_arguments(defined, args, kwargs, leaves)
    typed_device: dict[int, Any] = {}
    diagnostics: list[Diagnostic] = []
    # where the host arguments came in; the next refusals are met tracing again, from here
    call_site = called_at or _call_site(_user_frames(error.__traceback__), defined)
    current: BaseException | None = error
    while current is not None and len(diagnostics) < MAX_REFUSALS:
        primitive = jax_compat.mixed_memory_space_refusal(current)
        if primitive is None:
            break
        argument = _refused(current, [a for a in hosts if a.index not in typed_device])
        if argument is None:  # a value the function moves to host itself: the source shows where
            seen = _in_source(function, target)
            diagnostics.extend(seen or [_diagnostic(primitive, current, _moved_inside(function), function, target)])
            break
        diagnostics.append(_diagnostic(primitive, current, _committed(argument, call_site), function, target))
        typed_device[argument.index] = jax.ShapeDtypeStruct(argument.value.shape, argument.value.dtype)
        again = jax.tree_util.tree_unflatten(tree, [typed_device.get(i, leaf) for i, leaf in enumerate(leaves)])
        try:
            jax_compat.lower_for_platform(fn, again[0], again[1], jax_compat.lowering_platform(target))
            current = None
        except Exception as exc:  # noqa: BLE001 - the next refusal, or another error: either ends the search
            current = exc
    if not diagnostics:
        return None
    return Report(tuple(diagnostics), target, jax_compat.installed_version(), function=function)


def _host_arguments(defined: Any, args: Sequence[Any], kwargs: dict[str, Any], leaves: list[Any]) -> list[_Argument]:
    """The committed host arrays among the flat arguments, labelled as JAX labels them."""
    import jax

    from offload_fixer.jax_compat.tracing import host_memory_kind

    labels = _labels(defined, args, kwargs)
    found = []
    for index, leaf in enumerate(leaves):
        kind = host_memory_kind(leaf) if isinstance(leaf, jax.Array) else None
        if kind is not None:
            found.append(_Argument(labels[index] if index < len(labels) else f"argument {index}", index, leaf, kind))
    return found


def _labels(defined: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> list[str]:
    """``params['w']`` for each flat argument, in the order ``(args, kwargs)`` flattens (keyword
    arguments by name): the parameter's name and the leaf's pytree path."""
    import inspect

    import jax

    try:
        names = list(inspect.signature(defined).bind(*args, **kwargs).arguments)[: len(args)]
    except (TypeError, ValueError):
        names = []
    named = [(names[i] if i < len(names) else f"argument {i}", value) for i, value in enumerate(args)]
    named += [(key, kwargs[key]) for key in sorted(kwargs)]
    return [
        name + jax.tree_util.keystr(path)
        for name, value in named
        for path, _ in jax.tree_util.tree_flatten_with_path(value)[0]
    ]


def _refused(error: BaseException, candidates: list[_Argument]) -> _Argument | None:
    """The argument JAX's refusal names by its type (``float32<host>[8,4]``; a broadcast
    operand is shown with leading 1s: ``float32<host>[1,4]`` for a ``(4,)`` argument): the
    candidate of that dtype and shape, else the only one of that dtype."""
    match = _HOST_OPERAND.search(str(error))
    if match is None:
        return candidates[0] if len(candidates) == 1 else None
    dtype, dims = match.group(1), tuple(int(d) for d in match.group(2).replace(" ", "").split(",") if d)
    typed = [a for a in candidates if str(a.value.dtype) == dtype]
    for same in (
        [a for a in typed if tuple(a.value.shape) == dims],
        [a for a in typed if _without_leading_ones(tuple(a.value.shape)) == _without_leading_ones(dims)],
    ):
        if same:
            return same[0]
    return typed[0] if len(typed) == 1 else None


def _without_leading_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


def _committed(argument: _Argument, call_site: Span | None) -> Origin:
    """A committed host array passed to the function, where the user's code passed it."""
    return Origin(
        kind="host_argument",
        memory_kind=argument.memory_kind,
        span=call_site,
        detail=f"argument {argument.label} is a committed {argument.memory_kind} array",
        key=f"arg:{argument.index}",
        argument=argument.label,
        argument_index=argument.index,
    )


def _in_source(function: FunctionRef | None, target: str) -> list[Diagnostic]:
    """The source check's OFL1215 findings in the function's ``def`` (its file read as it is
    now): where a value the function moves to host meets a device value."""
    from offload_fixer import codes
    from offload_fixer.source.lookup import source_bytes
    from offload_fixer.static import check_source

    data = source_bytes(function.path) if function is not None and function.path else None
    if function is None or function.path is None or data is None:
        return []
    found = check_source(data, function.path, target=target).diagnostics
    return [
        d
        for d in found
        if d.code == codes.MIXED_MEMORY_SPACES and d.function is not None and d.function.line == function.line
    ]


def _moved_inside(function: FunctionRef | None) -> Origin:
    """A value the function itself moved to host: JAX's error does not say where."""
    name = f"`{function.name}`" if function is not None else "the function"
    return Origin(
        kind="move_to_host",
        memory_kind=PINNED_HOST,
        detail=f"a value {name} moves to {PINNED_HOST} (`offload-fixer check` shows where)",
        key="moved inside",
    )


def _diagnostic(
    primitive: str, error: BaseException, origin: Origin, function: FunctionRef | None, target: str
) -> Diagnostic:
    from offload_fixer.rules.ofl1215 import refused

    frames = _user_frames(error.__traceback__)
    at = Span(*frames[-1][:2], col=frames[-1][2]) if frames else None
    return refused(primitive, at, origin, function, target)


def _user_frames(traceback: types.TracebackType | None) -> list[tuple[str, int, int, types.CodeType]]:
    """``(path, line, column, code)`` of each frame of the user's code in ``traceback``,
    outermost first (JAX's own frames and this package's are left out)."""
    from offload_fixer.jax_compat.tracing import jax_roots

    ours = (os.path.dirname(os.path.abspath(__file__)) + os.sep, *jax_roots())
    found = []
    while traceback is not None:
        code = traceback.tb_frame.f_code
        path = os.path.abspath(code.co_filename)
        if not path.startswith(ours) and not code.co_filename.startswith("<frozen"):
            positions = list(code.co_positions())[traceback.tb_lasti // 2] if traceback.tb_lasti >= 0 else None
            column = positions[2] + 1 if positions and positions[2] is not None else 1
            found.append((path, traceback.tb_lineno, column, code))
        traceback = traceback.tb_next
    return found


def _call_site(frames: list[tuple[str, int, int, types.CodeType]], defined: Any) -> Span | None:
    """Where the user's code called the traced function: the frame before its own."""
    code = getattr(defined, "__code__", None)
    for before, frame in itertools.pairwise(frames):
        if frame[3] is code:
            return Span(before[0], before[1], col=before[2])
    return None
