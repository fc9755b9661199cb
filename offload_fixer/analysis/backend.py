"""What the released compilers' backends fail on after the host offloader has accepted a module.

The host offloader decides where values live; the TPU and GPU backends then have to build
what it decided, and some of it they cannot build. These are measured facts about released
compilers, not rules of XLA's sources, and each lives in the rule module of its code: its
``backend`` hook says which patterns fail on which compiler (OFL1207 host compute, OFL1212
stacks of inner loops, OFL1205 loops decided by a host value, OFL1208 / OFL1210 / OFL1213 copies between host and device, OFL1204 /
OFL1209 entry parameters and outputs), and its examples, compiled by the released compilers,
pin it. This module is the loop that calls those hooks, never edited for a new rule, and the
:class:`Backend` each hook reads: the walk's findings and the questions about the module's
instructions a hook asks (shapes, strides, loops, memory kinds), so no rule module reads MLIR.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jaxlib.mlir import ir

from offload_fixer import xla_messages as msg
from offload_fixer.analysis.offloader import (
    PURE_MEMORY_OPS,
    Failure,
    HostOffloadWalk,
    Node,
    Seed,
    WalkResult,
    is_bitcast_like,
)
from offload_fixer.ir import module as irm
from offload_fixer.jax_compat import XlaGeneration
from offload_fixer.model import DEVICE_KINDS, HOST_KINDS, HOST_MEMORY_SPACE_KINDS
from offload_fixer.rules import BACKEND_STAGES, all_rules

IN_PLACE_UPDATES = frozenset({"stablehlo.dynamic_update_slice", "stablehlo.scatter"})

Op = ir.Operation
"""An instruction of the module, as the hooks hand it back to :class:`Backend`'s questions."""


def backend_failures(walk: HostOffloadWalk, result: WalkResult, target: str) -> list[Failure]:
    """Failures of ``target``'s backend, in the order it meets them: each stage of its
    pipeline (host compute, loops, copies, the entry parameters and outputs), and within one
    the rules in code order."""
    backend = Backend(walk, result, target)
    rules = [rule for rule in all_rules() if rule.backend is not None]
    failures: list[Failure] = []
    for stage in BACKEND_STAGES:
        for rule in rules:
            if rule.backend_stage == stage and rule.backend is not None:
                failures.extend(rule.backend(backend))
    return failures


class Backend:
    """One module as the backend finds it once the host offloader is done: what the walk found
    (:attr:`result`) and the questions the rules' ``backend`` hooks ask of its instructions."""

    def __init__(self, walk: HostOffloadWalk, result: WalkResult, target: str) -> None:
        self._walk = walk
        self.result = result
        self.target = target
        self.xla: XlaGeneration = walk.xla
        """What the installed compilers' generation does where generations differ."""
        self.args = walk.view.args
        """The entry parameters (``index``, ``memory_kind``)."""
        self.results = walk.view.results
        """The entry outputs (``index``, ``memory_kind``)."""
        self.aliased_outputs = walk.view.aliased_outputs
        """Output index -> the donated parameter whose buffer it reuses."""

    def failure(
        self, seed: Seed | None, op: Op | None, message: msg.XlaMessage, parameter: int | None = None
    ) -> Failure:
        """The backend stops with ``message`` at ``op`` (on ``seed``'s value; naming entry
        parameter or output ``parameter``, where it names one)."""
        return Failure(seed, op, message, parameter=parameter)

    # -- what the walk found -----------------------------------------------------------------
    def host_compute(self) -> Iterator[tuple[Seed, Op]]:
        """Each instruction XLA turns into host compute, once, with the first host value it reads."""
        seeds: dict[Op, Seed] = {}
        for seed, ops in self.result.host_compute.items():
            for op in ops:
                seeds.setdefault(op, seed)
        yield from ((seed, op) for op, seed in seeds.items())

    def copies(self) -> Iterator[tuple[Seed, Op]]:
        """Each slice of a host value copied to device and each update written into a host
        buffer, once, with its host value."""
        seen: set[Op] = set()
        for found in (self.result.copied_slices, self.result.host_updates):
            for seed, ops in found.items():
                for op in ops:
                    if op not in seen:
                        seen.add(op)
                        yield seed, op

    def host_loops(self) -> Iterator[tuple[Seed, Op]]:
        """Each loop the host offloader put in host memory as a whole (its condition decided by
        a host value, on the generations whose walk goes on from the loop), once, with the
        first host value that decides it."""
        seen: set[Op] = set()
        for seed, loops in self.result.host_loops.items():
            for loop in loops:
                if loop not in seen:
                    seen.add(loop)
                    yield seed, loop

    def reached_outputs(self) -> set[int]:
        """The entry outputs a host value reaches (error 1200's, or streamed)."""
        return {reach.output for reach in self.result.reaches}

    # -- an instruction -------------------------------------------------------------------
    @staticmethod
    def kind(op: Op) -> str:
        """Its StableHLO name without the dialect (``dot_general``, ``slice``)."""
        return str(op.name).removeprefix("stablehlo.")

    @staticmethod
    def is_update(op: Op) -> bool:
        """A dynamic-update-slice (of the copies: an update written into a host buffer)."""
        return bool(op.name == "stablehlo.dynamic_update_slice")

    @staticmethod
    def rank(op: Op) -> int:
        return len(ir.RankedTensorType(op.results[0].type).shape)

    @staticmethod
    def buffer_shape(op: Op) -> list[int]:
        """The shape of the buffer an update writes into (a dynamic-update-slice's operand)."""
        return list(ir.RankedTensorType(op.operands[0].type).shape)

    @staticmethod
    def element_bits(op: Op) -> int | None:
        """The bit width of the elements ``op`` makes."""
        return irm.element_bits(op.results[0].type)

    @staticmethod
    def piece_shape(op: Op) -> list[int]:
        """The shape of what is copied: a slice's result, a dynamic-update-slice's update."""
        value = op.operands[1] if op.name == "stablehlo.dynamic_update_slice" else op.results[0]
        return list(ir.RankedTensorType(value.type).shape)

    @classmethod
    def partial_dimensions(cls, op: Op) -> list[int]:
        """The dimensions a slice (or an update) takes less than the whole of."""
        whole = ir.RankedTensorType(op.operands[0].type).shape
        return [dim for dim, (w, p) in enumerate(zip(whole, cls.piece_shape(op))) if p != w]

    @staticmethod
    def strides(op: Op) -> list[int]:
        """A slice's stride in each dimension (1 where it has none: a dynamic slice, an update)."""
        if "strides" not in op.attributes:
            return [1] * len(ir.RankedTensorType(op.results[0].type).shape)
        return list(ir.DenseI64ArrayAttr(op.attributes["strides"]))

    @staticmethod
    def single_update(op: Op) -> bool:
        """A scatter of exactly one update (one index vector)."""
        from jaxlib.mlir.dialects import stablehlo

        numbers = stablehlo.ScatterDimensionNumbers(op.attributes["scatter_dimension_numbers"])
        try:
            shape = list(ir.RankedTensorType(op.operands[1].type).shape)
        except (TypeError, ValueError):
            return False
        count = 1
        for dim in shape:
            count *= dim
        return count == len(numbers.scattered_dims_to_operand_dims)

    @staticmethod
    def constant_index_set(op: Op) -> bool:
        """A scatter that sets one element at a constant index (JAX's ``.at[i].set`` with a literal ``i``)."""
        return irm.is_constant_index_set_scatter(op)

    def in_loop_body(self, op: Op) -> bool:
        """Inside a while body, directly or through the functions JAX calls from one (a scan's
        body is a private function called in the loop)."""
        return self.loop_depth(op) > 0

    def loop_depth(self, op: Op, seen: frozenset[str] = frozenset()) -> int:
        """How many while bodies enclose ``op``, through the functions called from them (the
        deepest call site counts)."""
        depth = 0
        parent = op.parent
        while parent is not None and parent.name != "func.func":
            if parent.name == "stablehlo.while":
                depth += 1
            parent = parent.parent
        if parent is None:
            return depth
        name = irm.symbol_name(parent)
        if name in seen:
            return depth
        calls = self._walk.view.call_sites.get(name, ())
        return depth + max((self.loop_depth(call, seen | {name}) for call in calls), default=0)

    def reads_device_memory(self, op: Op) -> bool:
        """Whether an operand of ``op`` is in device memory (no host value reaches it)."""
        return any(not self._on_host_path(value) for value in op.operands)

    def update_from_host(self, op: Op) -> bool:
        """Whether a dynamic-update-slice's update is a host value."""
        return self._on_host_path(op.operands[1])

    def first_compute_user(self, parameter: int) -> Op | None:
        """The first instruction past pure memory operations that computes on entry parameter ``parameter``."""
        walk = self._walk

        def passes(node: Node) -> bool:
            op = node.owner if node.kind in ("op", "res") else None
            return node.kind == "arg" or (
                op is not None and (op.name in PURE_MEMORY_OPS or is_bitcast_like(op, walk.target))
            )

        start = Node("arg", walk.main_block, parameter)
        for node in walk._breadth_first(walk.successors(start), passes):
            if node.kind in ("op", "res") and not passes(node):
                op: Op = node.owner
                return op
        return None

    def returned_argument(self, output: int) -> int | None:
        """The entry argument output ``output`` returns unchanged (through JAX's placement
        annotation of the output), ``None`` where it returns a computed value."""
        block = self._walk.view.entry_block
        value = list(block.operations)[-1].operands[output]
        owner = _defining_op(value)
        while owner is not None and owner.name == "stablehlo.custom_call" and len(owner.operands) == 1:
            value = owner.operands[0]
            owner = _defining_op(value)
        if owner is not None:
            return None
        arguments = list(block.arguments)
        return next((i for i, argument in enumerate(arguments) if argument == value), None)

    def updated_in_place(self, output: int, donor: int) -> bool:
        """Whether output ``output`` is an update written into the donated parameter ``donor``
        itself (not into a copy of it)."""
        block = self._walk.view.entry_block
        returned = list(block.operations)[-1].operands[output]
        owner = _defining_op(returned)
        while owner is not None and owner.name == "stablehlo.custom_call" and len(owner.operands) == 1:
            owner = _defining_op(owner.operands[0])  # JAX's placement annotation of the output
        if owner is None or owner.name not in IN_PLACE_UPDATES:
            return False
        return bool(owner.operands[0] == block.arguments[donor])

    def gathered_host_outputs(self) -> Iterator[tuple[Seed, Op, tuple[int, ...], tuple[int, ...]]]:
        """Each entry output in host memory that a move to host makes of a value computed on
        device, with how many devices each dimension of the value and of the output is split
        over: ``(seed, move, value splits, output splits)``. The value's splits are those of the
        entry arguments it is computed from elementwise (the same shape), the most split of
        each dimension, as Shardy's propagation gives it; none where the module has no Shardy
        shardings."""
        block = self._walk.view.entry_block
        returned = list(block.operations)[-1].operands
        seeds = {seed.op: seed for seed in self.result.seeds if seed.op is not None}
        for output in self.results:
            if output.memory_kind not in HOST_MEMORY_SPACE_KINDS or output.splits is None:
                continue
            move = _defining_op(returned[output.index])
            seed = seeds.get(move) if move is not None else None
            if move is None or seed is None:
                continue
            splits = self._argument_splits(move.operands[0])
            if splits is not None:
                yield seed, move, splits, output.splits

    def _argument_splits(self, value: ir.Value[Any]) -> tuple[int, ...] | None:
        """The most devices each dimension of ``value`` is split over, among the entry arguments
        it is computed from through operations of its own shape."""
        shape = value.type
        arguments = self._walk.view.args
        block = self._walk.view.entry_block
        found: tuple[int, ...] | None = None
        stack, seen = [value], 0
        while stack and seen < 256:
            current = stack.pop()
            seen += 1
            owner = current.owner
            if isinstance(owner, ir.Block):
                if owner == block:
                    splits = arguments[ir.BlockArgument(current).arg_number].splits
                    if splits is not None:
                        found = splits if found is None else tuple(map(max, found, splits))
                continue
            stack.extend(operand for operand in owner.operation.operands if operand.type == shape)
        return found

    def host_kinds(self) -> frozenset[str]:
        """The memory kinds this target's backend keeps in host memory: XLA:GPU's
        ``unpinned_host`` is host memory, libtpu's is S(6) (neither host nor device)."""
        return HOST_KINDS if self.target == "gpu" else HOST_MEMORY_SPACE_KINDS

    @staticmethod
    def device_kinds() -> frozenset[str]:
        return DEVICE_KINDS

    def _on_host_path(self, value: ir.Value[Any]) -> bool:
        result = self.result
        owner = value.owner
        if isinstance(owner, ir.Block):
            number = ir.BlockArgument(value).arg_number
            return Node("arg", owner, number) in result.host_nodes or any(
                node.kind == "arg" and node.owner == owner and node.index == number for node in result.host_nodes
            )
        op = owner.operation
        number = ir.OpResult(value).result_number
        # Kind first: ``root`` nodes have no owner, and jaxlib 0.12's bindings raise on ``None == op``.
        return Node("op", op, None) in result.host_nodes or any(
            node.kind in ("op", "res") and node.owner == op and (node.index in (None, number))
            for node in result.host_nodes
        )


def _defining_op(value: ir.Value[Any]) -> ir.Operation | None:
    """The operation that defines ``value`` (None for a block argument)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if isinstance(owner, ir.OpView) else owner
