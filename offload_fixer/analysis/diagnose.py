"""From the walk's findings (MLIR operations) to diagnostics a user can act on.

Messages are XLA's own texts (:mod:`offload_fixer.xla_messages`) with XLA's names for the
user's module (:mod:`offload_fixer.ir.hlo_names`), so what the tool says is what the TPU log
says. :meth:`Diagnoser.prediction` is the compile outcome the findings add up to: the first
error XLA meets, which is what a released compiler's verdict is compared with.
"""

from __future__ import annotations

from dataclasses import replace

from jaxlib.mlir import ir

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.analysis import backend
from offload_fixer.analysis.offloader import Failure, Node, Reach, Seed, WalkResult, hlo_name, op_role
from offload_fixer.ir import module as irm
from offload_fixer.ir.hlo_names import HloNames
from offload_fixer.model import (
    DEVICE,
    PINNED_HOST,
    UNPINNED_HOST,
    Diagnostic,
    FixOption,
    FixStrategy,
    FunctionRef,
    Origin,
    OriginKind,
    OutputInfo,
    OutputVerdict,
    Prediction,
    Role,
    Severity,
    Span,
    Step,
)
from offload_fixer.rules import BACKEND_FAILS, COMPILER_ABORTS, COMPILER_FAILS, UNPINNED_MOVE, get_rule
from offload_fixer.source.jit_sites import in_shardings_span
from offload_fixer.source.locations import frame_path, output_path, user_span, written_as_move


def _fix(code: str, strategy: FixStrategy, index: int = 0) -> FixOption:
    """A remedy as the rule page documents it (title, why, safety): one text for every way in."""
    doc = get_rule(code).fixes[index]
    return FixOption(strategy, doc.title, doc.why, doc.safety)


class Diagnoser:
    def __init__(self, view: irm.ModuleView, target: str, function: FunctionRef | None, host_compute_offload: bool):
        self.view = view
        self.target = target
        self.function = function or _function_from_module(view)
        self.host_compute_offload = host_compute_offload
        self.names = HloNames(view)

    def diagnostics(self, walk: WalkResult, backend_failures: list[Failure]) -> list[Diagnostic]:
        out: list[Diagnostic] = []
        offending: dict[Seed, list[Reach]] = {}
        for reach in walk.reaches:
            if not reach.streamed:
                offending.setdefault(reach.seed, []).append(reach)
        for seed in walk.seeds:
            reaches = offending.get(seed, [])
            seen_outputs: set[int] = set()
            for reach in reaches:
                if reach.output in seen_outputs:
                    continue
                seen_outputs.add(reach.output)
                others = tuple(self._output_path(r.output) for r in reaches if r.output != reach.output)
                out.append(self._host_output(reach, tuple(dict.fromkeys(others))))
            if seed.memory_kind == UNPINNED_HOST and seed.op is not None:
                out.append(self._unpinned_move(seed))
            if walk.host_compute.get(seed):
                out.append(self._host_compute(seed, walk.host_compute[seed]))
            for op in walk.host_copies.get(seed, ()):
                out.append(self._host_copy(seed, op))
            for op in walk.host_slices.get(seed, ()):
                out.append(self._host_slice(seed, op))
        for failure in [*walk.failures, *backend_failures]:
            out.append(self._failure(failure))
        return _merge_same_place(out)

    def prediction(self, walk: WalkResult, backend_failures: list[Failure]) -> Prediction:
        """XLA stops at the host offloader's first error; without one, at the backend's first."""
        first = walk.errors[0] if walk.errors else (backend_failures[0] if backend_failures else None)
        if first is None:
            return Prediction("compiled")
        if isinstance(first, Reach):
            return Prediction("rejected", codes.HOST_VALUE_DEVICE_OUTPUT, self._node_name(first.starting), first.output)
        return Prediction(first.outcome, first.code, self._failure_subject(first))

    def outputs(self, walk: WalkResult) -> tuple[OutputInfo, ...]:
        verdicts: dict[int, OutputVerdict] = {}
        if walk.repaired:
            verdicts[0] = "streamed" if self.view.results[0].in_host_memory_space else "repaired"
        for reach in walk.reaches:
            if reach.streamed:
                verdicts.setdefault(reach.output, "streamed")
            else:
                verdicts[reach.output] = "error"
        infos = []
        for value in self.view.results:
            default: OutputVerdict = "host" if value.in_host_memory_space else "device"
            verdict = verdicts.get(value.index, default)
            infos.append(
                OutputInfo(
                    value.index,
                    self._output_path(value.index),
                    value.memory_kind,
                    verdict,
                    self._compiled_kind(value.index, value.memory_kind, verdict),
                    value.value_type,
                )
            )
        return tuple(infos)

    def _compiled_kind(self, index: int, declared: str, verdict: str) -> str:
        """Where the compiled executable returns an output. libtpu repairs a root move with a
        copy back to device; XLA:GPU keeps it on host, compiles ``unpinned_host`` outputs as
        pinned host memory, and returns a host output that no host value reaches (a slice
        copied out of host memory, a host computation's result) in device memory, unless the
        output reuses a donated host argument's buffer."""
        if verdict == "repaired":
            return DEVICE if self.target == "tpu" else PINNED_HOST
        if self.target == "gpu":
            if declared == UNPINNED_HOST:
                return PINNED_HOST
            donor = self.view.aliased_outputs.get(index)
            if verdict == "host" and (donor is None or not self.view.args[donor].in_host_memory_space):
                return DEVICE
        return declared

    # -- one diagnostic per finding ---------------------------------------------------------
    def _host_output(self, reach: Reach, related: tuple[str, ...]) -> Diagnostic:
        origin = self._origin(reach.seed)
        path = self._output_path(reach.output)
        shown_path = path or "(the whole result)"
        where = f"line {origin.span.line}" if origin.span else origin.detail
        explanation = (
            f"{_origin_phrase(origin)} ({where}) flows to output {shown_path} without a move back "
            f"to device, but that output's memory kind is "
            f"'{self.view.results[reach.output].memory_kind}'. "
            f"XLA's host offloader rejects this on {self.target} (error 1200) when it compiles; "
            "either move the value back to device before it is returned, or declare this output's "
            'sharding with memory_kind="pinned_host".'
        )
        return Diagnostic(
            code=codes.HOST_VALUE_DEVICE_OUTPUT,
            severity=_severity(codes.HOST_VALUE_DEVICE_OUTPUT, self.target),
            target=self.target,
            message=msg.OUTPUT_NOT_HOST.format(name=self._node_name(reach.starting)),
            explanation=explanation,
            output_index=reach.output,
            output_path=path,
            origin=origin,
            trace=self._trace(reach),
            span=origin.span,
            fixes=(_fix(codes.HOST_VALUE_DEVICE_OUTPUT, "device"), _fix(codes.HOST_VALUE_DEVICE_OUTPUT, "host", 1)),
            function=self.function,
            related_outputs=related,
        )

    def _host_compute(self, seed: Seed, ops: list[ir.Operation]) -> Diagnostic:
        origin = self._origin(seed)
        first = ops[0]
        names = ", ".join(dict.fromkeys(self._op_name(op) for op in ops[:8]))
        if self.host_compute_offload:
            message = msg.HOST_COMPUTE.format(name=self._op_name(first))
            severity = _severity(codes.DEVICE_COMPUTE_ON_HOST, self.target)
        else:
            message = msg.HOST_COMPUTE_DISABLED.format()
            severity = "error"
        return Diagnostic(
            code=codes.DEVICE_COMPUTE_ON_HOST,
            severity=severity,
            target=self.target,
            message=message,
            explanation=(
                f"{_origin_phrase(origin)} is used by {len(ops)} computation(s) ({names}) before any "
                "move back to device. XLA runs them on the host CPU over host memory, which is usually "
                "far slower than intended; the usual cause is a missing move back to device where the "
                "value enters the computation."
            ),
            origin=origin,
            trace=tuple(Step(op.name, Role.HOST_COMPUTE, self._span(op)) for op in ops),
            span=self._span(first) or origin.span,
            fixes=(_fix(codes.DEVICE_COMPUTE_ON_HOST, "device"),),
            function=self.function,
        )

    def _host_copy(self, seed: Seed, op: ir.Operation) -> Diagnostic:
        origin = self._origin(seed)
        return Diagnostic(
            code=codes.DEVICE_COMPUTE_ON_HOST,
            severity=_severity(codes.DEVICE_COMPUTE_ON_HOST, self.target),
            target=self.target,
            message=msg.HOST_COMPUTE.format(name="copy"),
            explanation=(
                f"The buffer {self._op_name(op)} updates in host memory is both returned and read "
                "again (moved to device). XLA gives the output its own copy of the buffer, and that "
                "copy of the whole buffer runs as host compute on every call. Read the buffer before "
                "the update, or return it without reading the updated value."
            ),
            origin=origin,
            trace=(Step(op.name, Role.HOST_COMPUTE, self._span(op)),),
            span=self._span(op) or origin.span,
            fixes=(_fix(codes.DEVICE_COMPUTE_ON_HOST, "device"),),
            function=self.function,
        )

    def _host_slice(self, seed: Seed, op: ir.Operation) -> Diagnostic:
        origin = self._origin(seed)
        name = self._op_name(op)
        return Diagnostic(
            code=codes.HOST_SLICE_NOT_MOVED_TO_DEVICE,
            severity=_severity(codes.HOST_SLICE_NOT_MOVED_TO_DEVICE, self.target),
            target=self.target,
            message=msg.SLICE_ON_HOST.format(opcode=hlo_name(op), name=name),
            explanation=(
                f"A slice of {_origin_phrase(origin).lower()} is not followed by a move to device on every "
                "path, so XLA cannot turn it into a host-to-device copy and runs it on the host instead."
            ),
            origin=origin,
            trace=(Step(op.name, Role.HOST_COMPUTE, self._span(op)),),
            span=self._span(op) or origin.span,
            fixes=(_fix(codes.HOST_SLICE_NOT_MOVED_TO_DEVICE, "device"),),
            function=self.function,
        )

    def _unpinned_move(self, seed: Seed) -> Diagnostic:
        origin = self._origin(seed)
        return Diagnostic(
            code=codes.UNPINNED_HOST_MEMORY,
            severity="warning",
            target=self.target,
            message=UNPINNED_MOVE.format(),
            explanation=get_rule(codes.UNPINNED_HOST_MEMORY).why_bad,
            origin=origin,
            span=origin.span,
            fixes=(_fix(codes.UNPINNED_HOST_MEMORY, "host"),),
            function=self.function,
        )

    def _failure(self, failure: Failure) -> Diagnostic:
        origin = self._origin(failure.seed) if failure.seed is not None else None
        subject = self._failure_subject(failure)
        message, explanation = self._failure_text(failure, subject)
        span = self._span(failure.op) if failure.op is not None else None
        return Diagnostic(
            code=failure.code,
            severity="error",
            target=self.target,
            message=message,
            explanation=explanation,
            origin=origin,
            trace=(Step(failure.op.name, Role.FAILURE, span),) if failure.op is not None else (),
            span=span or (origin.span if origin else None),
            fixes=(_fix(failure.code, "device"),),
            function=self.function,
        )

    def _failure_subject(self, failure: Failure) -> str | None:
        """The instruction or parameter XLA's message names for this failure."""
        if failure.message is msg.DUS_DEVICE_PARAMETER and failure.parameter is not None:
            return self._parameter_name(failure.parameter)
        if failure.message in (msg.WHILE_CONDITION_ROOT, msg.UNPINNED_OUTPUT):
            return None
        return self._op_name(failure.op) if failure.op is not None else None

    def _failure_text(self, failure: Failure, subject: str | None) -> tuple[str, str]:
        xla = failure.message
        if xla is msg.DUS_DEVICE_PARAMETER:
            return msg.DUS_DEVICE_PARAMETER.format(name=subject, index=""), (
                "A value moved to host is written into a buffer in place (a dynamic-update-slice, or "
                "a scatter XLA turns into one) whose buffer is an argument in device memory. XLA can "
                "only stream such updates into a buffer it allocates in host memory itself, from a "
                "broadcast such as jnp.zeros, or into a host argument; it rejects the module."
            )
        if xla is msg.DUS_NOT_BROADCAST:
            return msg.DUS_NOT_BROADCAST.format(name=subject), (
                "A value moved to host is written into a buffer with dynamic-update-slice (scan "
                "streaming), but that buffer does not come from a broadcast (e.g. jnp.zeros) XLA "
                "could allocate in host memory; XLA rejects the module."
            )
        if xla is msg.WHILE_CONDITION_COMPUTE:
            return msg.WHILE_CONDITION_COMPUTE.format(name=subject), (
                "A host buffer carried by a while loop is computed on in the loop's condition; XLA "
                "only allows moving host data around there."
            )
        if xla is msg.WHILE_CONDITION_ROOT:
            return COMPILER_ABORTS.format(xla=msg.WHILE_CONDITION_ROOT.format()), (
                "A value in host memory decides a while loop's condition. The released compilers' "
                "host offloader fails a CHECK when its walk reaches the condition's result, and the "
                "compiling process aborts with no error to catch. Keep what the condition reads on "
                "device (a running count or total carried beside the host buffer)."
            )
        if xla is msg.SHAPE_CHANGING_ANNOTATION:
            return COMPILER_FAILS.format(xla=msg.SHAPE_CHANGING_ANNOTATION.format()), (
                "A placement annotation declares another shape than its operand's. XLA removes the "
                "move once it has placed the value, replacing its uses with the operand, and that "
                "replacement rejects the differing shape. JAX never writes such an annotation; "
                "hand-written or rewritten StableHLO can."
            )
        return _backend_text(xla, self.target, subject)

    # -- helpers ----------------------------------------------------------------------------
    def _node_name(self, node: Node) -> str:
        """XLA's name for the instruction a walk starts from (what ``starting from`` prints)."""
        if node.kind == "root":
            return self.names.root() or "tuple"
        if node.kind == "arg":
            block = node.owner
            if block == self.view.entry_block:
                assert node.index is not None, "a parameter node has its argument number"
                return self._parameter_name(node.index)
            return "parameter"
        if node.kind == "res" and node.owner.name in ("stablehlo.case", "stablehlo.if"):
            # The move's user is its branch's root, a tuple XLA's conditional passes build.
            return "tuple"
        return self._op_name(node.owner)

    def _op_name(self, op: ir.Operation) -> str:
        return self.names.op(op) or hlo_name(op)

    def _parameter_name(self, index: int) -> str:
        return self.names.parameter(index) or f"Arg_{index}"

    def _trace(self, reach: Reach) -> tuple[Step, ...]:
        """The walk's path, from the move to host (the walk itself starts at its first user)."""
        steps = [self._step(node) for node in reach.path]
        if reach.seed.op is not None:
            steps.insert(0, self._step(Node("op", reach.seed.op, None)))
        return tuple(steps)

    def _step(self, node: Node) -> Step:
        if node.kind == "root":
            assert node.index is not None, "an output node has its output index"
            return Step(f"output {self._output_path(node.index) or '(result)'}", Role.OUTPUT, None)
        if node.kind == "arg":
            parent = node.owner.owner
            role = Role.HOST_ARGUMENT if node.owner == self.view.entry_block else Role.PARAMETER
            return Step(f"{parent.name} argument {node.index}", role, None)
        op = node.owner
        role = Role.MEMORY_OP if node.kind == "res" else op_role(op, self.target)
        return Step(op.name, role, self._span(op))

    def _origin(self, seed: Seed) -> Origin:
        if seed.kind == "host_argument":
            assert seed.arg_index is not None, "a host argument seed has its argument number"
            arg = self.view.args[seed.arg_index]
            label = arg.info or f"argument {seed.arg_index}"
            return Origin(
                kind="host_argument",
                memory_kind=seed.memory_kind,
                span=in_shardings_span(self.function) if self.function else None,
                detail=f"argument {label} declared {seed.memory_kind} (in_shardings)",
                key=f"arg:{seed.arg_index}",
                argument=arg.info or None,
                argument_index=seed.arg_index,
                value_type=arg.value_type,
            )
        op = seed.op
        assert op is not None, "a move-to-host seed has its move"
        location = self.view.location(op)
        span = user_span(location)
        kind: OriginKind = "offload_policy" if _from_offload_policy(location.name, span) else "move_to_host"
        what = location.primitive or "device_put"
        return Origin(
            kind=kind,
            memory_kind=seed.memory_kind,
            span=span,
            detail=f"{what} to {seed.memory_kind}" + (f" ({location.name})" if location.name else ""),
            key=f"move:{span.path}:{span.line}:{span.col}:{self.view.placements.index(op)}"
            if span
            else f"move:{self.view.placements.index(op)}",
        )

    def _span(self, op: ir.Operation) -> Span | None:
        return user_span(self.view.location(op))

    def _output_path(self, index: int) -> str:
        """Modules rebuilt from HLO dumps carry no ``jax.result_info``: fall back to the flat index."""
        info = self.view.results[index].info
        if not info and len(self.view.results) > 1:
            return f"[{index}]"
        return output_path(info)


def _backend_text(xla: msg.XlaMessage, target: str, subject: str | None) -> tuple[str, str]:
    """What a backend cannot build, and why, quoting the message it fails with."""
    summary, why = _BACKEND_TEXTS[xla]
    where = f' ("{subject}")' if subject else ""
    message = BACKEND_FAILS.format(
        summary=summary, subject=where, compiler=target.upper(), status=xla.status, xla=xla.placeholder()
    )
    return message, why


_BACKEND_TEXTS: dict[msg.XlaMessage, tuple[str, str]] = {
    backend.GPU_HOST_DOT: (
        "A dot computed in host memory cannot be compiled for GPU",
        (
            "XLA turns device compute on a host value into host compute, but XLA:GPU emits a dot as a "
            "GEMM fusion whose shape loses the host memory space, and the compile fails with an "
            "internal error. Move the operand back to device before the dot."
        ),
    ),
    backend.GPU_HOST_SCATTER: (
        "A scatter computed in host memory cannot be compiled for GPU",
        (
            "XLA:GPU rewrites a single-update scatter (a dynamic index, or an accumulating update) into "
            "a dynamic slice and a select whose result loses the host memory space, and the compile "
            "fails with an internal error. Move the buffer back to device before updating it."
        ),
    ),
    backend.TPU_LOOP_DOT: (
        "A dot in a loop body mixes host and device memory",
        (
            "A dot inside a loop whose operand lives in host memory while another is in device memory "
            "becomes host compute tied to a device loop buffer, which libtpu cannot build: it fails a "
            "CHECK in its host-compute alias assignment (the compiling process aborts) or, once the "
            "loop is differentiated, with an internal error on the async host call. Move the host "
            "operand to device before the loop (or inside it, before the dot)."
        ),
    ),
    backend.TPU_HOST_CUSTOM_FUSION: (
        "A gather or multi-index scatter in host memory cannot be compiled for TPU",
        (
            "libtpu emits host compute of gathers and scatters of several updates as custom fusions "
            "that its host backend has no configuration for, and the compile fails with an internal "
            "error. Move the operand back to device first."
        ),
    ),
    backend.TPU_UNPINNED_PARAMETER: (
        "An 'unpinned_host' argument is computed on",
        (
            "On TPU 'unpinned_host' is memory space S(6), which the host offloader does not stream "
            "from; a fusion that reads such an argument gets a parameter shape that disagrees with "
            "its operand and libtpu fails with an internal error. Declare the argument 'pinned_host' "
            "and move it to device before computing on it."
        ),
    ),
    backend.TPU_UNPINNED_OUTPUT: (
        "An 'unpinned_host' output is computed in device memory",
        (
            "On TPU 'unpinned_host' is memory space S(6), and libtpu has no copy from device memory "
            "into it for an output. Declare the output 'pinned_host' (or 'device')."
        ),
    ),
}


def _merge_same_place(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """One computation reached by several host values (the leaves of one streamed pytree, say)
    is one problem at one place: keep the first diagnostic and name the other origins in it.
    OFL1200 stays one per output, since each output is fixed on its own."""
    merged: dict[tuple[str, Span | None], int] = {}
    others: dict[int, list[str]] = {}
    out: list[Diagnostic] = []
    for diagnostic in diagnostics:
        key = (diagnostic.code, diagnostic.span)
        if diagnostic.code in codes.HOST_COMPUTE_CODES and diagnostic.span is not None and key in merged:
            others.setdefault(merged[key], []).append(
                diagnostic.origin.detail if diagnostic.origin else "another host value"
            )
            continue
        merged[key] = len(out)
        out.append(diagnostic)
    for index, details in others.items():
        first = out[index]
        out[index] = replace(
            first,
            explanation=f"{first.explanation} The same computation is also reached by: {'; '.join(details)}.",
        )
    return out


def _severity(code: str, target: str) -> Severity:
    """One table of severities, shared with the rule pages (``offload-fixer rules``)."""
    return get_rule(code).severity(target)


def _origin_phrase(origin: Origin) -> str:
    return {
        "host_argument": "A host-memory argument",
        "move_to_host": "A value moved to host memory",
        "offload_policy": "A residual offloaded to host by a checkpoint policy",
        "host_compute": "A value computed on host",
    }[origin.kind]


def _from_offload_policy(name: str | None, span: Span | None) -> bool:
    """A remat policy's moves sit under a transformation (``jvp()``, ``remat``) and point at a
    line that spells no move; a ``device_put`` the user wrote points at itself."""
    if span is not None:
        return not written_as_move(span)
    return name is not None and any(tag in name for tag in ("checkpoint", "remat", "jvp("))


def _function_from_module(view: irm.ModuleView) -> FunctionRef | None:
    """``jit_step`` -> ``step``, with the file of the first op traced inside it."""
    name = view.name or ""
    if name.startswith("jit_"):
        name = name[len("jit_") :]
    if not name:
        return None
    for op in irm.walk_operations(view.main):
        location = view.location(op)
        if user_span(location) is None:
            continue
        # Every op traced inside the function has its frame on the stack: the first op with
        # user frames decides, so a module of a library function costs one op, not a scan.
        path = frame_path(location, name)
        return FunctionRef(name=name, path=path) if path else FunctionRef(name=name)
    return FunctionRef(name=name)
