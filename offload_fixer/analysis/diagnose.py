"""From the walk's findings (MLIR operations) to diagnostics a user can act on.

Messages are XLA's own texts (:mod:`offload_fixer.xla_messages`) with XLA's names for the
user's module (:mod:`offload_fixer.ir.hlo_names`), so what the tool says is what the TPU log
says. :meth:`Diagnoser.prediction` is the compile outcome the findings add up to: the first
error XLA meets, which is what a released compiler's verdict is compared with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from jaxlib.mlir import ir

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.analysis.offloader import Failure, Node, Reach, Seed, WalkResult, hlo_name, op_role
from offload_fixer.ir import module as irm
from offload_fixer.ir.hlo_names import HloNames
from offload_fixer.jax_compat import XlaGeneration
from offload_fixer.jax_compat.compiler_bugs import CompilerBug, known_bug
from offload_fixer.model import (
    DEVICE,
    HOST_KINDS,
    PINNED_HOST,
    UNPINNED_HOST,
    WORKAROUND,
    CompilerBugNote,
    Diagnostic,
    FixOption,
    FunctionRef,
    Origin,
    OriginKind,
    OutputInfo,
    OutputVerdict,
    Prediction,
    RematPolicy,
    Role,
    Sharding,
    Span,
    Step,
    leaves_in_words,
)
from offload_fixer.rules import all_rules, get_rule
from offload_fixer.source.jit_sites import in_shardings_span
from offload_fixer.source.locations import frame_path, output_path, user_span, written_as_move


class Diagnoser:
    """One lowered module's diagnostics. Each rule's ``from_walk`` hook is handed this object:
    XLA's names (:meth:`node_name`, :meth:`op_name`), the user's source (:meth:`origin`,
    :meth:`span`, :meth:`trace`) and the output paths, so no rule module reads MLIR itself."""

    def __init__(
        self,
        view: irm.ModuleView,
        target: str,
        function: FunctionRef | None,
        host_compute_offload: bool,
        xla: XlaGeneration | None = None,
        compiler_release: str | None = None,
    ):
        """``compiler_release``: the release of the target's compiler the program meets
        (``jax_compat.compiler_bugs.compiler_release``), whose known bugs its failures are
        matched against; ``None``: none is known, and no failure is taken for a bug."""
        self.view = view
        self.compiler_release = compiler_release
        self.target = target
        self.function = function or _function_from_module(view)
        self.host_compute_offload = host_compute_offload
        self.names = HloNames(view, target, xla)

    def diagnostics(self, walk: WalkResult, backend_failures: list[Failure]) -> list[Diagnostic]:
        """Each rule's hook on each host value, then one diagnostic per compile failure."""
        self._unstreamed: dict[Seed, list[Reach]] = {}
        for reach in walk.reaches:
            if not reach.streamed:
                self._unstreamed.setdefault(reach.seed, []).append(reach)
        hooks = [rule.from_walk for rule in all_rules() if rule.from_walk is not None]
        out: list[Diagnostic] = []
        for seed in walk.seeds:
            for hook in hooks:
                out.extend(hook(self, seed, walk))
        for failure in [*walk.failures, *backend_failures]:
            out.append(self._failure(failure))
        return [self._with_output_sharding(d) for d in _merge_same_place(out)]

    def _with_output_sharding(self, diagnostic: Diagnostic) -> Diagnostic:
        """A diagnostic about an output of a partitioned module names the output's layout."""
        index = diagnostic.output_index
        if index is None or not 0 <= index < len(self.view.results):
            return diagnostic
        sharding = self.sharding(self.view.results[index])
        return diagnostic if sharding is None else replace(diagnostic, sharding=sharding)

    def sharding(self, value: irm.EntryValue) -> Sharding | None:
        """An entry value's layout, where the module is partitioned over several devices."""
        return value.sharding if self.view.partitions > 1 else None

    def policy_diagnostics(self, policies: Sequence[RematPolicy]) -> list[Diagnostic]:
        """Each rule's hook on each remat offload policy of the traced program."""
        hooks = [rule.from_policy for rule in all_rules() if rule.from_policy is not None]
        return [diagnostic for policy in policies for hook in hooks for diagnostic in hook(self, policy)]

    def updates_returned_on_device(self, seed: Seed, walk: WalkResult) -> list[int]:
        """The outputs that return a host argument's value moved to device and updated in its
        own tensor type (its state after the step: ``0.9 * mu + g``), in device memory that
        JAX inferred from the types (no ``out_shardings`` declares it). Followed through the
        operations of the entry's own block whose result has the argument's type."""
        if seed.kind != "host_argument" or seed.arg_index is None:
            return []
        argument = self.view.args[seed.arg_index]
        block = self.view.entry_block
        values = [move.result for move in walk.device_moves.get(seed, ())]
        seen: set[ir.Operation] = set()
        found: set[int] = set()
        while values:
            for use in values.pop().uses:
                owner = use.owner
                user = owner.operation if isinstance(owner, ir.OpView) else owner
                if user.name == "func.return" and user.parent == self.view.main:
                    found.add(use.operand_number)
                elif user.block == block and user not in seen:
                    seen.add(user)
                    values.extend(r for r in user.results if str(r.type) == argument.value_type)
        results = self.view.results
        return sorted(
            i
            for i in found
            if results[i].value_type == argument.value_type
            and not results[i].declared
            and results[i].memory_kind not in HOST_KINDS
        )

    def unstreamed_reaches(self, seed: Seed) -> list[Reach]:
        """The outputs ``seed`` reaches without being streamed (error 1200 unless declared host)."""
        return self._unstreamed.get(seed, [])

    def prediction(self, walk: WalkResult, backend_failures: list[Failure]) -> Prediction:
        """XLA stops at the host offloader's first error; without one, at the backend's first."""
        first = walk.errors[0] if walk.errors else (backend_failures[0] if backend_failures else None)
        if first is None:
            return Prediction("compiled")
        if isinstance(first, Reach):
            return Prediction("rejected", codes.HOST_VALUE_DEVICE_OUTPUT, self.node_name(first.starting), first.output)
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
                    self.output_path(value.index),
                    value.memory_kind,
                    verdict,
                    self._compiled_kind(value.index, value.memory_kind, verdict),
                    value.value_type,
                    self.sharding(value),
                    value.declared,
                )
            )
        return tuple(infos)

    def _compiled_kind(self, index: int, declared: str, verdict: str) -> str:
        """Where the compiled executable returns an output. libtpu repairs a root move with a
        copy back to device; XLA:GPU keeps it on host, compiles ``unpinned_host`` outputs as
        pinned host memory, and returns a host output that no host value reaches (a slice
        copied out of host memory, a host computation's result) in device memory, and an
        output that reuses a donated host argument's buffer in host memory, even one declared
        device."""
        if verdict == "repaired":
            return DEVICE if self.target == "tpu" else PINNED_HOST
        if self.target == "gpu":
            if declared == UNPINNED_HOST:
                return PINNED_HOST
            donor = self.view.aliased_outputs.get(index)
            if donor is not None and self.view.args[donor].in_host_memory_space:
                return PINNED_HOST  # the output is the donated host buffer, whatever it declares
            if verdict == "host":
                return DEVICE
        return declared

    # -- compile failures -------------------------------------------------------------------
    def _failure(self, failure: Failure) -> Diagnostic:
        rule = get_rule(failure.code)
        origin = self.origin(failure.seed) if failure.seed is not None else None
        message, explanation = rule.failure_texts[failure.message](self._failure_subject(failure), self.target)
        span = self.span(failure.op) if failure.op is not None else None
        fixes: tuple[FixOption, ...] = (rule.fix_option(rule.failure_fix),)
        note = None
        bug = known_bug(failure.message.kind, self.target, self.compiler_release)
        if bug is not None and self.compiler_release is not None:
            note, message, explanation, fixes = _as_compiler_bug(
                bug, self.compiler_release, message, explanation, fixes[0]
            )
        return Diagnostic(
            code=failure.code,
            severity="error",
            target=self.target,
            message=message,
            explanation=explanation,
            origin=origin,
            trace=(Step(failure.op.name, Role.FAILURE, span),) if failure.op is not None else (),
            span=span or (origin.span if origin else None),
            fixes=fixes,
            function=self.function,
            compiler_bug=note,
        )

    def _failure_subject(self, failure: Failure) -> str | None:
        """The instruction or parameter XLA's message names for this failure."""
        if failure.message is msg.DUS_DEVICE_PARAMETER and failure.parameter is not None:
            return self._parameter_name(failure.parameter)
        if failure.message is msg.WHILE_CONDITION_ROOT:
            return None
        return self.op_name(failure.op) if failure.op is not None else None

    # -- helpers ----------------------------------------------------------------------------
    def node_name(self, node: Node) -> str:
        """XLA's name for the instruction a walk starts from (what ``starting from`` prints)."""
        if node.kind == "root":
            return self.names.root() or "tuple"
        if node.kind == "arg":
            block = node.owner
            if block == self.view.entry_block:
                assert node.index is not None, "a parameter node has its argument number"
                return self._parameter_name(node.index)
            loop = block.owner.operation
            if loop.name == "stablehlo.while":
                # The move's user is the tuple of the loop's operands, which XLA names after
                # the loop (``while.4`` for ``while.5``): the loop's tag lands on it first.
                return self.op_name(loop)
            return "parameter"
        if node.kind == "res" and node.owner.name in ("stablehlo.case", "stablehlo.if"):
            # The move's user is its branch's root, a tuple XLA's conditional passes build.
            return "tuple"
        return self.op_name(node.owner)

    def op_name(self, op: ir.Operation) -> str:
        return self.names.op(op) or hlo_name(op)

    def opcode(self, op: ir.Operation) -> str:
        """XLA's opcode for ``op`` (``dynamic-slice``)."""
        return hlo_name(op)

    def _parameter_name(self, index: int) -> str:
        return self.names.parameter(index) or f"Arg_{index}"

    def trace(self, reach: Reach) -> tuple[Step, ...]:
        """The walk's path, from the move to host (the walk itself starts at its first user)."""
        steps = [self._step(node) for node in reach.path]
        if reach.seed.op is not None:
            steps.insert(0, self._step(Node("op", reach.seed.op, None)))
        return tuple(steps)

    def _step(self, node: Node) -> Step:
        if node.kind == "root":
            assert node.index is not None, "an output node has its output index"
            return Step(f"output {self.output_path(node.index) or '(result)'}", Role.OUTPUT, None)
        if node.kind == "arg":
            parent = node.owner.owner
            role = Role.HOST_ARGUMENT if node.owner == self.view.entry_block else Role.PARAMETER
            return Step(f"{parent.name} argument {node.index}", role, None)
        op = node.owner
        role = Role.MEMORY_OP if node.kind == "res" else op_role(op, self.target)
        return Step(op.name, role, self.span(op))

    def origin(self, seed: Seed) -> Origin:
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
                sharding=self.sharding(arg),
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

    def span(self, op: ir.Operation) -> Span | None:
        return user_span(self.view.location(op))

    def output_path(self, index: int) -> str:
        """Modules rebuilt from HLO dumps carry no ``jax.result_info``: fall back to the flat index."""
        info = self.view.results[index].info
        if not info and len(self.view.results) > 1:
            return f"[{index}]"
        return output_path(info)


def _as_compiler_bug(
    bug: CompilerBug, release: str, message: str, explanation: str, workaround: FixOption
) -> tuple[CompilerBugNote, str, str, tuple[FixOption, ...]]:
    """A failure that is a known bug of the released compiler, worded so: which release fixes
    it and which JAX installs that, the rule's remedy kept as the workaround a user must ask
    for (``--strategy workaround``)."""
    note = CompilerBugNote(f"{bug.package} {release}", bug.fixed_in, bug.fixing_jax, bug.reference)
    explanation = (
        f"The program is correct: {note.compiler} cannot compile it and {bug.package} {bug.fixed_in} "
        f"does ({bug.reference}). Until you can upgrade, the workaround (--strategy {WORKAROUND}): {explanation}"
    )
    upgrade = f"JAX {bug.fixing_jax}" if bug.fixing_jax else f"{bug.package} {bug.fixed_in}"
    fixes = (
        FixOption(
            workaround.strategy,
            f"Upgrade to {upgrade}",
            f"{bug.package} {bug.fixed_in} compiles the program as it is.",
            "display-only",
        ),
        replace(workaround, title=f"{workaround.title} (with --strategy {WORKAROUND})"),
    )
    return note, f"{message}: {bug.summary(release)}", explanation, fixes


def _merge_same_place(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """One computation reached by several host values (the leaves of one streamed pytree, say)
    is one problem at one place: keep the first diagnostic and name the other origins in it.
    OFL1200 stays one per output, since each output is fixed on its own."""
    merged: dict[tuple[str, Span | None], int] = {}
    others: dict[int, list[Origin | None]] = {}
    out: list[Diagnostic] = []
    for diagnostic in diagnostics:
        key = (diagnostic.code, diagnostic.span)
        if diagnostic.code in codes.HOST_COMPUTE_CODES and diagnostic.span is not None and key in merged:
            others.setdefault(merged[key], []).append(diagnostic.origin)
            continue
        merged[key] = len(out)
        out.append(diagnostic)
    for index, origins in others.items():
        first = out[index]
        # the same origin reaching the place again (through another inlined call) is not another
        details = _other_origins(origins, first.origin)
        if not details:
            continue
        out[index] = replace(
            first,
            explanation=f"{first.explanation} The same computation is also reached by: {'; '.join(details)}.",
        )
    return out


def _other_origins(origins: list[Origin | None], own: Origin | None) -> list[str]:
    """The other host values that reach a computation, in words: the leaves of streamed
    arguments declared alike in one phrase however many there are (``8 leaves of opt_state[0]
    (.mu, .nu) declared pinned_host (in_shardings)``), every other origin by its detail."""
    details: list[str] = []
    streamed: dict[str, list[str]] = {}
    """Argument labels by the words after them (``declared pinned_host (in_shardings)``)."""
    for origin in origins:
        detail = origin.detail if origin is not None else "another host value"
        if own is not None and detail == own.detail:
            continue
        label = origin.argument if origin is not None and origin.kind == "host_argument" else None
        if label and detail.startswith(f"argument {label} "):
            rest = detail[len(f"argument {label} ") :]
            if rest not in streamed:
                details.append(f"\0{rest}")  # the phrase goes in the place of its first leaf
            streamed.setdefault(rest, []).append(label)
        else:
            details.append(detail)

    def phrase(rest: str) -> str:
        labels = list(dict.fromkeys(streamed[rest]))
        if len(labels) <= 2:
            return f"argument{'s' if len(labels) > 1 else ''} {', '.join(labels)} {rest}"
        return f"{leaves_in_words(labels)} {rest}"

    return list(dict.fromkeys(phrase(d[1:]) if d.startswith("\0") else d for d in details))


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
