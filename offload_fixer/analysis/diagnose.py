"""From the walk's findings (MLIR operations) to diagnostics a user can act on."""

from __future__ import annotations

from dataclasses import replace

from jaxlib.mlir import ir

from offload_fixer.analysis.offloader import Failure, Node, Reach, Seed, WalkResult, hlo_name, op_role
from offload_fixer.ir import module as irm
from offload_fixer.rules import get_rule
from offload_fixer.model import Diagnostic, FixOption, FunctionRef, Origin, OutputInfo, Span, Step
from offload_fixer.source.jit_sites import in_shardings_span
from offload_fixer.source.locations import frame_path, output_path, user_span, written_as_move

ERROR_TARGETS = ("tpu", "gpu-legacy")

def _fix(code: str, strategy: str, index: int = 0) -> FixOption:
    """A remedy as the rule page documents it (title, why, safety): one text for every way in."""
    doc = get_rule(code).fixes[index]
    return FixOption(strategy, doc.title, doc.why, doc.safety)


class Diagnoser:
    def __init__(self, view: irm.ModuleView, target: str, function: FunctionRef | None, host_compute_offload: bool):
        self.view = view
        self.target = target
        self.function = function or _function_from_module(view)
        self.host_compute_offload = host_compute_offload

    def diagnostics(self, walk: WalkResult) -> list[Diagnostic]:
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
            if seed.memory_kind == "unpinned_host" and seed.op is not None:
                out.append(self._unpinned(seed, returned=bool(reaches)))
            if walk.host_compute.get(seed):
                out.append(self._host_compute(seed, walk.host_compute[seed]))
            for op in walk.host_slices.get(seed, ()):
                out.append(self._host_slice(seed, op))
        for failure in walk.failures:
            out.append(self._failure(failure))
        return _merge_same_place(out)

    def outputs(self, walk: WalkResult) -> tuple[OutputInfo, ...]:
        verdicts: dict[int, str] = {}
        for reach in walk.reaches:
            if reach.streamed:
                verdicts.setdefault(reach.output, "streamed")
            else:
                verdicts[reach.output] = "error" if self._is_error(reach.output) else "layout-updated"
        infos = []
        for value in self.view.results:
            default = "host" if value.memory_kind in irm.HOST_KINDS else "device"
            infos.append(
                OutputInfo(value.index, self._output_path(value.index), value.memory_kind,
                           verdicts.get(value.index, default))
            )
        return tuple(infos)

    # -- one diagnostic per finding ---------------------------------------------------------
    def _host_output(self, reach: Reach, related: tuple[str, ...]) -> Diagnostic:
        origin = self._origin(reach.seed)
        path = self._output_path(reach.output)
        error = self._is_error(reach.output)
        shown_path = path or "(the whole result)"
        if error:
            message = self._xla_1200_message(reach)
            severity = "error"
        else:
            message = (
                f"Output {shown_path} receives a host value but is declared device memory; XLA on "
                "GPU silently switches it to host memory (output streamed, layout updated)."
            )
            severity = "warning"
        where = f"line {origin.span.line}" if origin.span else origin.detail
        explanation = (
            f"{_origin_phrase(origin)} ({where}) flows to output {shown_path} without a move back "
            f"to device, but that output's memory kind is "
            f"'{self.view.results[reach.output].memory_kind}'. "
            + (
                f"XLA's host offloader rejects this on {self.target} (error 1200) when it compiles; "
                if error
                else "Newer XLA on GPU returns this output in host memory instead of failing, so "
                "callers receive a host array where they expect a device one; "
            )
            + "either move the value back to device before it is returned, or declare this output's "
            "sharding with memory_kind=\"pinned_host\"."
        )
        return Diagnostic(
            code="OFL1200",
            severity=severity,
            target=self.target,
            message=message,
            explanation=explanation,
            output_index=reach.output,
            output_path=path,
            origin=origin,
            trace=self._trace(reach),
            span=origin.span,
            fixes=(_fix("OFL1200", "device"), _fix("OFL1200", "host", 1)),
            function=self.function,
            related_outputs=related,
        )

    def _host_compute(self, seed: Seed, ops: list[ir.Operation]) -> Diagnostic:
        origin = self._origin(seed)
        first = ops[0]
        names = ", ".join(dict.fromkeys(hlo_name(op) for op in ops[:8]))
        if self.host_compute_offload:
            message = (
                f"Found an instruction (\"{hlo_name(first)}\") which does device compute in host memory "
                "space. Converting into host compute. This is likely to have a very slow execution time."
            )
            severity = _severity("OFL1201", self.target)
        else:
            message = "Automatic host compute offloading is disabled."
            severity = "error"
        return Diagnostic(
            code="OFL1201",
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
            trace=tuple(Step(op.name, "host compute", self._span(op)) for op in ops),
            span=self._span(first) or origin.span,
            fixes=(_fix("OFL1201", "device"),),
            function=self.function,
        )

    def _host_slice(self, seed: Seed, op: ir.Operation) -> Diagnostic:
        origin = self._origin(seed)
        name = hlo_name(op)
        return Diagnostic(
            code="OFL1206",
            severity=_severity("OFL1206", self.target),
            target=self.target,
            message=(
                f"Encountered {name} on tensor which is in host memory. {name} does not move the tensor "
                f"back to device. {name} will be converted into host compute."
            ),
            explanation=(
                f"A slice of {_origin_phrase(origin).lower()} is not followed by a move to device on every "
                "path, so XLA cannot turn it into a host-to-device copy and runs it on the host instead."
            ),
            origin=origin,
            trace=(Step(op.name, "host compute", self._span(op)),),
            span=self._span(op) or origin.span,
            fixes=(_fix("OFL1206", "device"),),
            function=self.function,
        )

    def _unpinned(self, seed: Seed, returned: bool) -> Diagnostic:
        """An error where the value is returned (the rule's severity), a warning otherwise."""
        origin = self._origin(seed)
        return Diagnostic(
            code="OFL1204",
            severity=_severity("OFL1204", self.target) if returned else "warning",
            target=self.target,
            message="Value moved to 'unpinned_host': JAX types it as device memory while XLA moves it to host.",
            explanation=(
                "XLA treats an 'unpinned_host' placement as a move to host, but JAX 0.7.1 and newer "
                "type the result as device memory, so a returned value fails with error 1200, and an "
                "offload policy with offload_dst='unpinned_host' silently offloads nothing. Use "
                "'pinned_host' for host offloading."
            ),
            origin=origin,
            span=origin.span,
            fixes=(_fix("OFL1204", "host"),),
            function=self.function,
        )

    def _failure(self, failure: Failure) -> Diagnostic:
        origin = self._origin(failure.seed)
        explanations = {
            "OFL1202": (
                "A value moved to host is written into a buffer with dynamic-update-slice (scan "
                "streaming), but that buffer does not come from a broadcast (e.g. jnp.zeros) XLA "
                "could allocate in host memory; XLA rejects the module."
            ),
            "OFL1203": (
                "The first instruction using the moved value has several operands; XLA's host "
                "offloader aborts the whole process on this CHECK (openxla/xla#34565) instead of "
                "reporting an error. Move the value back to device before computing on it."
            ),
            "OFL1205": (
                "A host buffer carried by a while loop is computed on in the loop's condition; XLA "
                "only allows moving host data around there."
            ),
        }
        return Diagnostic(
            code=failure.code,
            severity=_severity(failure.code, self.target),
            target=self.target,
            message=failure.message,
            explanation=explanations[failure.code],
            origin=origin,
            trace=(Step(failure.op.name, "failure", self._span(failure.op)),),
            span=self._span(failure.op) or origin.span,
            fixes=(_fix(failure.code, "device"),),
            function=self.function,
        )

    # -- helpers ----------------------------------------------------------------------------
    def _is_error(self, output: int) -> bool:
        if self.target in ERROR_TARGETS:
            return True
        bits = self.view.results[output].element_bits
        return bits is not None and bits < 8  # sub-byte elements carry an explicitly customised layout

    def _xla_1200_message(self, reach: Reach) -> str:
        start = reach.starting
        if start.kind == "root" and len(self.view.results) == 1 and reach.seed.op is not None:
            return (
                f"Tensor which is moved to host (custom call \"{hlo_name(reach.seed.op)}\") is returned from "
                "the entry computation but the layout for this output is not set to host memory."
            )
        return (
            f"Tensor which is moved to host (starting from {self._node_name(start)}) is returned from the "
            "entry computation but the layout for this output is not set to host memory."
        )

    def _node_name(self, node: Node) -> str:
        if node.kind == "root":
            return "tuple"
        if node.kind == "arg":
            block = node.owner
            if block == self.view.entry_block:
                return f"Arg_{node.index}"
            return "parameter"
        return hlo_name(node.owner)

    def _trace(self, reach: Reach) -> tuple[Step, ...]:
        """The walk's path, from the move to host (the walk itself starts at its first user)."""
        steps = [self._step(node) for node in reach.path]
        if reach.seed.op is not None:
            steps.insert(0, self._step(Node("op", reach.seed.op, None)))
        return tuple(steps)

    def _step(self, node: Node) -> Step:
        if node.kind == "root":
            return Step(f"output {self._output_path(node.index) or '(result)'}", "output", None)
        if node.kind == "arg":
            parent = node.owner.owner
            role = "host argument" if node.owner == self.view.entry_block else "parameter"
            return Step(f"{parent.name} argument {node.index}", role, None)
        op = node.owner
        role = "memory op" if node.kind == "res" else op_role(op)
        return Step(op.name, role, self._span(op))

    def _origin(self, seed: Seed) -> Origin:
        if seed.kind == "host_argument":
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
            )
        op = seed.op
        location = self.view.location(op)
        span = user_span(location)
        kind = "offload_policy" if _from_offload_policy(location.name, span) else "move_to_host"
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


MERGED_CODES = ("OFL1201", "OFL1203", "OFL1206")


def _merge_same_place(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """One computation reached by several host values (the leaves of one streamed pytree, say)
    is one problem at one place: keep the first diagnostic and name the other origins in it.
    OFL1200 stays one per output, since each output is fixed on its own."""
    merged: dict[tuple, int] = {}
    others: dict[int, list[str]] = {}
    out: list[Diagnostic] = []
    for diagnostic in diagnostics:
        key = (diagnostic.code, diagnostic.span, diagnostic.message)
        if diagnostic.code in MERGED_CODES and diagnostic.span is not None and key in merged:
            others.setdefault(merged[key], []).append(diagnostic.origin.detail if diagnostic.origin else "another host value")
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


def _severity(code: str, target: str) -> str:
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
    return bool(name) and any(tag in name for tag in ("checkpoint", "remat", "jvp("))


def _function_from_module(view: irm.ModuleView) -> FunctionRef | None:
    """``jit_step`` -> ``step``, with the file of the first op traced inside it."""
    name = view.name or ""
    if name.startswith("jit_"):
        name = name[len("jit_"):]
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
