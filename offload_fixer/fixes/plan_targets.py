"""Reading a group of diagnostics into a :class:`FixTarget`: the function, the outputs, the
returns, the origin, the computations on the host value and, for a streamed argument, the
parameter, its host leaves and the state outputs that return them. Each codemod is handed its
own part of it (``narrowed(codemod.TARGET, ...)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from offload_fixer import jax_compat
from offload_fixer.codemods.eager_to_device import EagerTarget
from offload_fixer.codemods.fix_command import FixCommand
from offload_fixer.codemods.move_to_device import MoveToDeviceTarget
from offload_fixer.codemods.pin_host_memory import PinTarget
from offload_fixer.codemods.targets import FunctionTarget, narrowed
from offload_fixer.codes import HOST_COMPUTE_CODES, HOST_VALUE_DEVICE_OUTPUT, OFFLOAD_DOES_NOTHING, UNPINNED_HOST_MEMORY
from offload_fixer.findings import split_argument
from offload_fixer.fixes.plan_sources import Source, in_file, same_file
from offload_fixer.model import HOST_KINDS, Diagnostic, OutputInfo, PathKey, Role, format_output_path, parse_output_path


@dataclass(frozen=True)
class FixTarget(MoveToDeviceTarget, PinTarget, EagerTarget):
    """What the planner reads from a group of diagnostics: every field some codemod's own
    target has (a subclass of each), so each codemod's target is a part of it."""


def fix_target(
    group: list[Diagnostic],
    path: str | None,
    spelling: jax_compat.Spelling,
    source: Source | None,
    tree: tuple[OutputInfo, ...],
) -> FixTarget:
    first = group[0]
    function = next((d.function for d in group if d.function is not None), None)
    origin = next((d.origin for d in group if d.origin is not None), None)
    origin_span = in_file(origin.span if origin else None, path)
    if origin is None and first.code in (UNPINNED_HOST_MEMORY, OFFLOAD_DOES_NOTHING):
        origin_span = in_file(first.span, path)  # a policy's destination or name: the literal itself
    offending = [d for d in group if d.code == HOST_VALUE_DEVICE_OUTPUT]
    return_spans = [in_file(d.return_span, path) for d in offending]
    function_line = function.line if function is not None and same_file(function.path, path) else None
    inner_line = origin_span.line if origin_span else next((s.line for s in return_spans if s), None)
    compute = tuple(
        dict.fromkeys(
            (step.span.line, step.span.col)
            for d in group
            for step in d.trace
            if step.role == Role.HOST_COMPUTE and step.span is not None and same_file(step.span.path, path)
        )
    )
    target = FixTarget(
        function_name=function.name if function is not None else None,
        function_line=function_line,
        inner_line=inner_line,
        output_paths=output_paths(offending) or ("",),
        return_lines=tuple(sorted({s.line for s in return_spans if s})) if return_spans and all(return_spans) else (),
        origin_line=origin_span.line if origin_span else None,
        origin_col=origin_span.col if origin_span else None,
        compute_spans=compute,
        output_kinds=tuple((info.path, info.memory_kind) for info in tree),
        spelling=spelling,
    )
    eager_span = in_file(first.span, path) if function is not None and function.eager else None
    if eager_span is not None:  # the user's eager line: the operation and its host operand, no function
        target = replace(
            target,
            function_name=None,
            function_line=None,
            inner_line=None,
            eager_line=eager_span.line,
            eager_col=eager_span.col,
            eager_end_col=eager_span.end_col if eager_span.end_line == eager_span.line else None,
            operand_index=origin.argument_index if origin is not None and origin.argument_index is not None else 0,
        )
    if origin is not None and origin.kind == "host_argument" and source is not None and source.outline is not None:
        parameter = source.host_parameter(target, origin)
        if parameter is not None:
            leaves = sorted(
                {
                    split_argument(d.origin.argument)[1]
                    for d in group
                    if d.origin is not None
                    and d.origin.argument
                    and split_argument(d.origin.argument)[0] == parameter[0]
                }
            )
            target = replace(
                target,
                parameter=parameter[0],
                parameter_path=parameter[1],
                parameter_leaves=tuple(leaves) if all(leaves) else (),
            )
    return target


def output_paths(group: Sequence[Diagnostic]) -> tuple[str, ...]:
    paths: list[str] = []
    for d in group:
        paths.append(d.output_path or "")
        paths.extend(d.related_outputs)
    return tuple(dict.fromkeys(paths))


def state_outputs(
    group: list[Diagnostic], target: FixTarget, source: Source | None, tree: tuple[OutputInfo, ...] = ()
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Outputs that return the streamed argument's host leaves (the state that enters as host)
    and are declared device memory: they are declared host, so the state stays host. Found
    where a return gives back the parameter's name, else by the output tree's structure (the
    one sub-tree with the argument's host leaves), else, for an argument streamed whole into a
    function with a single array output (``ema = update(ema, w)``), that output. An output whose
    tensor type differs from the host leaf's (``relu(x + bias)`` for a streamed ``bias``) is a new
    value, not the state. A source check (no output tree) reads how each output is made
    (:mod:`~offload_fixer.codemods.state_flow`); the second result is the outputs it cannot tell
    the state from a new value for."""
    leaves = [parse_output_path(p) for p in (target.parameter_leaves or ("",))]
    kinds = {parse_output_path(p): k for p, k in target.output_kinds}
    prefixes: list[tuple[PathKey, ...]] = []
    if source is not None and source.outline is not None and target.parameter:
        prefixes = source.returned_at(target, target.parameter)
    offending = {parse_output_path(d.output_path or "") for d in group if d.code == HOST_VALUE_DEVICE_OUTPUT}
    # the output paths: the analysis's tree, else (a source check) what the returns spell
    shown = set(kinds) or (set(source.returned_paths(target)) if source is not None and source.outline else set())
    mirrors: list[tuple[PathKey, ...]] = []
    if shown and all(leaves):
        candidates = {
            keys[: len(keys) - len(leaves[0])] for keys in shown if keys[len(keys) - len(leaves[0]) :] == leaves[0]
        }
        fitting = [q for q in candidates if all((*q, *leaf) in shown for leaf in leaves)]
        mirrors = fitting if len(fitting) == 1 else []
    prefixes = prefixes or mirrors
    if not kinds:
        if source is None or source.outline is None or not target.parameter:
            return (), ()
        # the outputs run would compare types for: where the parameter is returned, where the
        # returns mirror its host leaves' keys, or one array out for the whole argument
        candidates = {(*prefix, *leaf) for prefix in prefixes for leaf in leaves}
        if not prefixes and leaves == [()] and shown == {()}:
            candidates = {()}
        verdicts = source.returned_state(target, sorted(offending, key=repr), leaves, mirrors)
        # elsewhere only what the source shows: the state by a tree.map, an update of a leaf
        kept = tuple(format_output_path(keys) for keys, verdict in verdicts.items() if verdict == "state")
        undecided = tuple(
            format_output_path(keys)
            for keys, verdict in verdicts.items()
            if verdict == "derived" or (keys in candidates and verdict == "unknown")
        )
        return kept, undecided
    if not prefixes and leaves == [()] and list(kinds) == [()]:
        # the whole argument in, one array out: the function returns the state, where the
        # analysis saw the types (below)
        prefixes = [()]
    types = {parse_output_path(info.path): info.value_type for info in tree if info.value_type}
    leaf_types = {
        parse_output_path(split_argument(d.origin.argument)[1]): d.origin.value_type
        for d in group
        if d.origin is not None and d.origin.argument and d.origin.value_type
    }
    state = []
    for prefix in prefixes:
        for leaf in leaves:
            keys = (*prefix, *leaf)
            out_type, in_type = types.get(keys), leaf_types.get(leaf)
            if out_type and in_type and out_type != in_type:
                continue
            kind = kinds.get(keys)
            if kind is not None and kind not in HOST_KINDS:
                state.append(format_output_path(keys))
    state = list(dict.fromkeys(state))
    if state and source is not None and source.outline is not None and target.parameter:
        # a type that matches by chance (``local @ w.T`` shaped like the streamed activation):
        # where every return makes it as a new value (a contraction, a reduction), it is not
        # the state, as the source check decides
        made = source.returned_state(target, [parse_output_path(p) for p in state], leaves, mirrors)
        state = [p for p in state if made.get(parse_output_path(p)) != "new"]
    return tuple(state), ()


def host_computed(group: Sequence[Diagnostic]) -> bool:
    return any(d.code in HOST_COMPUTE_CODES for d in group) or any(
        step.role == Role.HOST_COMPUTE for d in group for step in d.trace
    )


def imported_jit_target(
    group: Sequence[Diagnostic], target: FixTarget, source: Source | None, codemod: type[FixCommand]
) -> tuple[str, FunctionTarget] | None:
    """(file, target) that keeps the state host at the function's jit site in another file,
    where ``run`` saw it jitted (``FunctionRef.jit_path``): only where every return in the
    function's own file is a tuple (that file's ``out_shardings`` spells the structure from
    the output tree) and the parameter's position is known."""
    function = next((d.function for d in group if d.function is not None), None)
    if source is None or function is None or not function.jit_path or not function.jit_line or not target.parameter:
        return None
    index = source.positional_index(target, target.parameter)
    if index is None or not source.returns_tuples(target):
        return None
    at_jit = replace(target, function_line=None, inner_line=function.jit_line, parameter_index=index)
    return function.jit_path, narrowed(codemod.TARGET, at_jit)
