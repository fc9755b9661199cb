"""XLA's host-offloader walk, replayed over StableHLO.

This mirrors ``xla/hlo/transforms/host_offloader.cc`` and ``xla/service/host_offload_utils.cc``:

* seeds: host-memory entry arguments first (input streaming), then every move to host,
  computation by computation in post order (a loop body's before the entry's) and in
  program order within one (a move already reached by an earlier walk is not a seed again);
* from a move to host, the *starting instructions* are its first users that are not
  bitcast-like (a dynamic-update-slice always starts one);
* the walk is breadth-first over (value, tuple index): moves to device end a path, slices
  end it only when every downstream path reaches a move to device, pure memory ops keep the
  value on host, anything else becomes host compute and the walk goes on through it;
* reaching ``@main``'s return compares the output's memory kind: host means "output
  streamed", anything else is error 1200.

Where the released compilers (libtpu, JAX's CUDA plugin) do otherwise than XLA's main-branch
sources, the walk follows the released compilers (``docs/xla-host-offloader.md``): only
``pinned_host`` parameters and outputs are host memory (``unpinned_host`` is S(6) on TPU), a
move that is the whole single output is repaired, a slice that reaches an output is a DMA,
a walk that reaches a loop condition's root aborts the compiler (up to jaxlib 0.11; from 0.12
the walk goes on from the whole loop, which lands in host memory), and the DUS buffer walk
rejects a buffer that is a device parameter. Errors are recorded in the order XLA meets them
(``WalkResult.errors``): XLA stops at the first.

It knows nothing of Python source: findings carry MLIR operations, and
:mod:`offload_fixer.analysis.diagnose` turns them into user-facing diagnostics.

Over 500 lines on purpose: one walk, mirroring XLA's host offloader pass step by step, whose
steps share its state.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from jaxlib.mlir import ir

from offload_fixer import xla_messages
from offload_fixer.ir import module as irm
from offload_fixer.jax_compat import XlaGeneration, xla_generation
from offload_fixer.model import PINNED_HOST, Role

# HLO opcodes that ``IsValidDuringPureMemoryOffload`` accepts, as the StableHLO ops they come from.
PURE_MEMORY_OPS = frozenset(
    {
        "stablehlo.get_tuple_element",
        "stablehlo.tuple",
        "func.call",
        "stablehlo.while",
        "stablehlo.case",
        "stablehlo.if",
        "stablehlo.optimization_barrier",
        "stablehlo.custom_call",
        "sdy.sharding_constraint",
        "sdy.reshard",
        "sdy.manual_computation",
        "stablehlo.bitcast",
    }
)
SLICES = frozenset({"stablehlo.slice", "stablehlo.dynamic_slice"})
# What newer XLA lets stand between a slice and its move to device.
BETWEEN_SLICE_AND_MOVE = frozenset(
    {
        "stablehlo.get_tuple_element",
        "stablehlo.tuple",
        "stablehlo.optimization_barrier",
        "stablehlo.while",
        "func.call",
        "sdy.sharding_constraint",
    }
)
INLINED_CALLS = frozenset({"func.call", "sdy.manual_computation"})
"""Calls XLA inlines before the host offloader runs (nested jits; a shard_map on one device)."""
SHARD_MAP_BODY = "shmap_body"
"""XLA's call inliner leaves a call whose callee's name contains this in place."""
SEPARATE_COMPUTATIONS = frozenset({"stablehlo.while", "stablehlo.case", "stablehlo.if"})
"""Ops whose regions XLA makes computations of their own (the rest it inlines or keeps in the
computation that holds them)."""
REGION_RESULT_OWNERS = frozenset({"stablehlo.case", "stablehlo.if", "sdy.manual_computation"})


class Node(NamedTuple):
    """One (instruction, shape index) of the walk.

    ``kind``: ``op`` (all results of an instruction), ``res`` (result ``index`` of a structural
    op), ``arg`` (block argument ``index``: a parameter), ``root`` (``@main`` output ``index``),
    ``cond`` (the root of a while loop's condition, ``owner`` the loop).
    """

    kind: str
    owner: Any
    """An ``ir.Operation`` (``op``, ``res``, ``cond``), an ``ir.Block`` (``arg``) or ``None`` (``root``)."""
    index: int | None  # type: ignore[assignment]  # shadows tuple.index, which nothing calls on a Node
    path: tuple[int, ...] = ()
    calls: tuple[Any, ...] = ()
    """The calls XLA inlines that the walk entered to reach this node, innermost last: XLA's
    call inliner gives each call site its own copy of the callee before the host offloader
    runs, so a value leaving the callee returns to the call it came in by, not to every call
    of the function (JAX's ``dynamic_index_in_dim``, called by a scan's forward loop on host
    weights and by its backward loop on the device residuals)."""


@dataclass(frozen=True)
class Seed:
    kind: str  # "host_argument" | "move_to_host"
    memory_kind: str
    op: ir.Operation | None = None
    arg_index: int | None = None


@dataclass
class Reach:
    """A host value from ``seed`` reaching output ``output``, with the path it took."""

    seed: Seed
    output: int
    streamed: bool
    path: list[Node]
    starting: Node


@dataclass
class Failure:
    """A verdict other than error 1200: the message XLA stops with, which knows its code."""

    seed: Seed | None
    op: ir.Operation | None
    message: xla_messages.XlaMessage
    parameter: int | None = None
    """The entry parameter the failure names, where it names one."""

    @property
    def code(self) -> str:
        assert self.message.code is not None, self.message.kind
        return self.message.code

    @property
    def outcome(self) -> Literal["rejected", "aborted"]:
        """``rejected`` (XLA returns an error) or ``aborted`` (a CHECK kills the compiler)."""
        return "aborted" if self.message.severity == "crash" else "rejected"


@dataclass
class WalkResult:
    reaches: list[Reach] = field(default_factory=list)
    host_compute: dict[Seed, list[ir.Operation]] = field(default_factory=dict)
    host_slices: dict[Seed, list[ir.Operation]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    seeds: list[Seed] = field(default_factory=list)
    errors: list[Reach | Failure] = field(default_factory=list)
    """Every error in the order XLA's pass meets them; the compile stops at the first."""
    repaired: list[Seed] = field(default_factory=list)
    """Moves that are the whole single output: XLA repairs them (a copy to host)."""
    host_copies: dict[Seed, list[ir.Operation]] = field(default_factory=dict)
    """Updated host buffers XLA copies (host compute) because the output and a reader both hold them."""
    host_nodes: set[Node] = field(default_factory=set)
    """Every (instruction, index) a host value reached: what the backend finds in host memory."""
    copied_slices: dict[Seed, list[ir.Operation]] = field(default_factory=dict)
    """Slices of host values that XLA turns into host-to-device copies of just the slice."""
    host_updates: dict[Seed, list[ir.Operation]] = field(default_factory=dict)
    """Dynamic-update-slices into host buffers: XLA copies the update from device into the
    buffer (on TPU an async dynamic-update-slice)."""
    device_moves: dict[Seed, list[ir.Operation]] = field(default_factory=dict)
    """The moves to device that end a host value's paths."""
    returned_moves: dict[ir.Operation, tuple[int, ...]] = field(default_factory=dict)
    """Moves to device whose result is only returned (the entry outputs it is): how JAX
    retypes a host value for a device ``out_shardings`` leaf."""
    round_trips: list[Seed] = field(default_factory=list)
    """Moves to host whose every first user is a move to device (bitcasts and sharding
    annotations between): a round trip XLA:GPU removes."""
    host_loops: dict[Seed, list[ir.Operation]] = field(default_factory=dict)
    """Loops whose condition a host value decides, on the generations whose walk goes on from
    the whole loop (``XlaGeneration.while_condition_on_host_aborts`` false): every result of
    the loop is in host memory."""


class HostOffloadWalk:
    def __init__(self, view: irm.ModuleView, target: str = "tpu", xla: XlaGeneration | None = None) -> None:
        self.view = view
        self.target = target
        self.xla = xla or xla_generation()
        self.main_block = view.entry_block
        self.allocated_buffers: set[ir.Operation] = set()
        """Dynamic-update-slices already known to write into host memory (XLA's
        ``dynamic_update_slices_already_allocated_``): their buffer needs no broadcast check."""

    # -- the pass -----------------------------------------------------------------------
    def run(self) -> WalkResult:
        result = WalkResult()
        for arg in self.view.args:
            if arg.in_host_memory_space:
                seed = Seed("host_argument", arg.memory_kind, arg_index=arg.index)
                result.seeds.append(seed)
                self._walk(seed, Node("arg", self.main_block, arg.index), result, insert_copy_before=False)
        visited_moves: set[ir.Operation] = set()
        for op in self._moves_in_xla_order():
            if op in visited_moves:
                continue
            seed = Seed("move_to_host", irm.placement(op) or PINNED_HOST, op=op)
            result.seeds.append(seed)
            starts = self._starting_nodes(op)
            if starts and all(node.kind == "op" and irm.is_move_to_device(node.owner) for node in starts):
                result.round_trips.append(seed)
            if self._is_repaired_root(starts):
                result.repaired.append(seed)
                visited_moves.add(op)
                continue
            for start in starts:
                self._walk(seed, start, result, insert_copy_before=True, visited_moves=visited_moves)
            visited_moves.add(op)
            if op.results[0].type != op.operands[0].type:
                # Removing the move replaces its uses with its operand, whose shape differs.
                failure = Failure(seed, op, xla_messages.SHAPE_CHANGING_ANNOTATION)
                result.failures.append(failure)
                result.errors.append(failure)
        return result

    def _moves_in_xla_order(self) -> list[ir.Operation]:
        """The moves to host in the order XLA's pass handles them: computation by computation
        in post order (a loop's body and condition, a conditional's branches before the
        computation that runs them; calls XLA inlines belong to their caller), in program
        order within one. A move in a loop body is handled before one in the entry (measured:
        ``while_condition_on_host`` under JAX 0.12 fails at the body's update first)."""
        finish: dict[ir.Operation, int] = {}
        counter = iter(range(1 << 30))
        on_stack: set[str] = set()

        def computation(block: ir.Block) -> None:
            mine: list[ir.Operation] = []
            for view in block.operations:
                visit(view.operation, mine)
            number = next(counter)
            for move in mine:
                finish.setdefault(move, number)

        def visit(op: ir.Operation, mine: list[ir.Operation]) -> None:
            if irm.is_move_to_host(op):
                mine.append(op)
            if op.name == "func.call":
                name = irm.callee_name(op)
                callee = self.view.functions.get(name)
                if callee is None or name in on_stack:
                    return
                on_stack.add(name)
                if self._inlined(op):
                    for view in callee.regions[0].blocks[0].operations:
                        visit(view.operation, mine)
                else:
                    computation(callee.regions[0].blocks[0])
                on_stack.discard(name)
                return
            regions = list(op.regions)
            if op.name == "stablehlo.while":
                regions.reverse()  # XLA's while calls its body, then its condition
            for region in regions:
                for block in region.blocks:
                    if op.name in SEPARATE_COMPUTATIONS:
                        computation(block)
                    else:
                        for view in block.operations:
                            visit(view.operation, mine)

        computation(self.main_block)
        moves = [op for op in self.view.placements if irm.is_move_to_host(op)]
        return sorted(moves, key=lambda op: finish.get(op, len(finish)))

    def _returned_and_read(self, op: ir.Operation) -> bool:
        """An in-place update whose buffer is an entry output and is also read elsewhere: XLA's
        copy insertion gives the output its own copy, made in host memory."""
        users = [use.owner.operation for use in op.results[0].uses]
        returned = any(user.name == "func.return" and user.parent == self.view.main for user in users)
        return returned and len(users) > 1

    def _returned_as(self, move: ir.Operation) -> tuple[int, ...]:
        """The entry outputs a move to device's result is, when it is nothing else (bitcasts
        and sharding annotations between); empty when anything else uses it."""
        outputs: list[int] = []
        for node in self._breadth_first(self.successors(Node("op", move, None)), lambda n: n.kind != "root"):
            op = _op(node)
            if node.kind == "root":
                assert node.index is not None, "an output node has its output index"
                outputs.append(node.index)
            elif op is None or not is_bitcast_like(op, self.target):
                return ()
        return tuple(sorted(set(outputs)))

    def _is_repaired_root(self, starts: list[Node]) -> bool:
        """``HandleMoveToHostCustomCall``: a move with no users that is the entry root (the
        whole single output) gets a copy to host in its place instead of an error."""
        return len(self.view.results) == 1 and bool(starts) and all(node.kind == "root" for node in starts)

    def _inlined(self, op: ir.Operation) -> bool:
        """Whether XLA's call inliner has inlined the call: from jaxlib 0.7 not a shard_map body
        called by name (``shmap_body``, how JAX lowers ``shard_map`` before Shardy), which it
        keeps as a call (``XlaGeneration.inlines_shard_map_body``)."""
        if op.name != "func.call" or SHARD_MAP_BODY not in irm.callee_name(op):
            return True
        return self.xla.inlines_shard_map_body

    def _starting_nodes(self, move: ir.Operation) -> list[Node]:
        """``GetStartingInstructions``: the first users past bitcast-like ops (a DUS always starts)."""

        def passes_through(node: Node) -> bool:
            op = _op(node)
            if node.kind == "res" and op is not None and op.name in INLINED_CALLS and self._inlined(op):
                return True  # XLA has inlined the call by now: its result is the callee's value
            return op is not None and not _starts_buffer(op) and is_bitcast_like(op, self.target)

        first_users = self.successors(Node("op", move, None))
        return [node for node in self._breadth_first(first_users, passes_through) if not passes_through(node)]

    def _breadth_first(self, starts: Iterable[Node], expand: Callable[[Node], bool]) -> Iterator[Node]:
        """Each node reachable from ``starts`` once, following users only from nodes ``expand`` accepts."""
        queue = deque(starts)
        seen: set[Node] = set()
        while queue:
            node = queue.popleft()
            if node in seen:
                continue
            seen.add(node)
            yield node
            if expand(node):
                queue.extend(self.successors(node))

    def _walk(
        self,
        seed: Seed,
        start: Node,
        result: WalkResult,
        insert_copy_before: bool,
        visited_moves: set[ir.Operation] | None = None,
    ) -> None:
        parents: dict[Node, Node | None] = {start: None}
        queue = deque([start])
        dynamic_update_slices: list[ir.Operation] = []
        errored = False
        # XLA stops at the first error; the walk goes on to find every output the value
        # reaches, and records only that first error as the compile's outcome.
        while queue:
            node = queue.popleft()
            result.host_nodes.add(node)
            if node.kind == "root":
                assert node.index is not None, "an output node has its output index"
                output = self.view.results[node.index]
                streamed = output.in_host_memory_space
                reach = Reach(seed, node.index, streamed, _path_to(node, parents), start)
                result.reaches.append(reach)
                if not streamed and not errored:
                    result.errors.append(reach)
                    errored = True
                continue
            if node.kind == "cond":
                if self.xla.while_condition_on_host_aborts:
                    if not errored:
                        failure = Failure(seed, node.owner, xla_messages.WHILE_CONDITION_ROOT)
                        result.failures.append(failure)
                        result.errors.append(failure)
                        errored = True
                    continue
                # From jaxlib 0.12 the condition's root leads to the loop at shape index {}:
                # the walk goes on through every result of the loop.
                loop = Node("op", node.owner, None, calls=node.calls)
                if node.owner not in result.host_loops.setdefault(seed, []):
                    result.host_loops[seed].append(node.owner)
                if loop not in parents:
                    parents[loop] = node
                    queue.append(loop)
                continue
            if (
                self.target == "tpu"
                and self.xla.tpu_custom_call_tuple_alias_aborts
                and _aliased_into_one_of_several(node)
            ):
                # XLA goes on with the operand's shape index (b/342650757) and fails a CHECK at
                # the call's tuple: the compiling process dies there.
                if not errored:
                    failure = Failure(seed, node.owner, xla_messages.ALIASED_INTO_ONE_RESULT)
                    result.failures.append(failure)
                    result.errors.append(failure)
                    errored = True
                continue
            if node.kind == "op":
                op = node.owner
                if irm.is_move_to_device(op):
                    result.device_moves.setdefault(seed, []).append(op)
                    returned = self._returned_as(op)
                    if returned:
                        result.returned_moves[op] = returned
                    continue
                if irm.is_move_to_host(op):
                    if visited_moves is not None:
                        visited_moves.add(op)
                elif _starts_buffer(op):
                    if op.name == "stablehlo.dynamic_update_slice":
                        result.host_updates.setdefault(seed, []).append(op)
                    if node == start:
                        dynamic_update_slices.append(op)
                    else:
                        self.allocated_buffers.add(op)
                    if self._returned_and_read(op):
                        result.host_copies.setdefault(seed, []).append(op)
                elif _is_host_computation(op):
                    continue
                elif op.name in PURE_MEMORY_OPS or is_bitcast_like(op, self.target):
                    pass
                elif op.name in SLICES and self._slice_leads_to_move_to_device(node):
                    result.copied_slices.setdefault(seed, []).append(op)
                    continue
                else:
                    if op.name in SLICES:
                        result.host_slices.setdefault(seed, []).append(op)
                    else:
                        result.host_compute.setdefault(seed, []).append(op)
            for succ in self.successors(node):
                if succ not in parents:
                    parents[succ] = node
                    queue.append(succ)
        if errored:
            return
        for dus in dynamic_update_slices:
            buffer_failure = self._check_buffer_comes_from_broadcast(seed, dus)
            if buffer_failure:
                result.failures.append(buffer_failure)
                result.errors.append(buffer_failure)
                return

    # -- graph steps ----------------------------------------------------------------------
    def successors(self, node: Node) -> Iterator[Node]:
        """``users()`` in XLA's order: the order the users were built in. MLIR lists a value's
        uses newest first, so they are read backwards (which output XLA's error 1200 reaches
        first, when one value reaches several: ``(w - g, w + g)`` stops at output 0)."""
        for value, path in self._values(node):
            for use in reversed(list(value.uses)):
                yield from self._successors_through(use.owner.operation, use.operand_number, path, node.calls)

    def _values(self, node: Node) -> Iterator[tuple[ir.Value[Any], tuple[int, ...]]]:
        if node.kind == "op":
            for value in node.owner.results:
                yield value, node.path
        elif node.kind == "res":
            yield node.owner.results[node.index], node.path
        elif node.kind == "arg":
            yield node.owner.arguments[node.index], node.path

    def _successors_through(
        self, user: ir.Operation, k: int, path: tuple[int, ...], calls: tuple[Any, ...] = ()
    ) -> Iterator[Node]:
        name = user.name
        if name == "func.return":
            func = _parent(user)
            if func == self.view.main:
                yield Node("root", None, k, path)
            elif calls and irm.callee_name(calls[-1]) == irm.symbol_name(func):
                # an inlined call: back to the call site the walk came in by
                yield Node("res", calls[-1], k, path, calls[:-1])
            else:
                # entered by no call the walk followed (a move to host in the callee), or a
                # call XLA keeps: every caller (XLA's call graph)
                for call in self.view.call_sites.get(irm.symbol_name(func), ()):
                    yield Node("res", call, k, path, calls)
        elif name in ("stablehlo.return", "sdy.return", "mhlo.return"):
            parent = _parent(user)
            if parent.name == "stablehlo.while":
                if _terminator(parent.regions[1].blocks[0]) == user:
                    yield Node("res", parent, k, path, calls)
                else:  # the loop condition's root: XLA's GetSuccessors has no index for it
                    yield Node("cond", parent, k, path, calls)
            elif parent.name in REGION_RESULT_OWNERS:
                yield Node("res", parent, k, path, calls)
            else:
                yield Node("op", parent, None, path, calls)
        elif name == "func.call":
            callee = self.view.functions.get(irm.callee_name(user))
            if callee is not None:
                inner = calls + (user,) if self._inlined(user) else calls
                yield Node("arg", callee.regions[0].blocks[0], k, path, inner)
        elif name == "stablehlo.while":
            yield Node("arg", user.regions[1].blocks[0], k, path, calls)
            yield Node("arg", user.regions[0].blocks[0], k, path, calls)
        elif name == "sdy.manual_computation":
            yield Node("arg", user.regions[0].blocks[0], k, path, calls)
        elif name == "stablehlo.optimization_barrier":
            yield Node("res", user, k, path, calls)
        elif name == "stablehlo.tuple":
            yield Node("res", user, 0, (k,) + path, calls)
        elif name == "stablehlo.get_tuple_element":
            if path and path[0] == irm.tuple_index(user):
                yield Node("res", user, 0, path[1:], calls)
        elif name == "stablehlo.custom_call" and not (
            _is_copy_like_custom_call(user) or irm.is_move_to_host(user) or irm.is_move_to_device(user)
        ):
            aliased = irm.aliased_results(user, k)
            if aliased and not path and len(user.results) > 1 and self.xla.custom_call_alias_reaches_every_result:
                # XLA follows the custom call with the operand's shape index, not the result's
                # (host_offload_utils' GetSuccessors, b/342650757): each element read is the value.
                aliased = list(range(len(user.results)))
            for index in aliased:
                yield Node("res", user, index, path, calls)
        else:
            yield Node("op", user, None, path, calls)

    def _slice_leads_to_move_to_device(self, node: Node) -> bool:
        """``SliceLeadsToMoveToDeviceCustomCall``: every path from the slice ends at a move to
        device. The released compilers also accept the entry root: a slice that is returned
        becomes a host-to-device copy of just that slice (libtpu 0.0.17.1 only where it is the
        entry's only output: ``XlaGeneration.slice_to_single_output_is_dma``)."""

        def keeps_going(succ: Node) -> bool:
            op = _op(succ)
            return succ.kind not in ("root", "cond") and not (op is not None and irm.is_move_to_device(op))

        for succ in self._breadth_first(self.successors(node), keeps_going):
            if succ.kind == "root":
                if self.xla.slice_to_output_is_dma or (
                    self.xla.slice_to_single_output_is_dma and len(self.view.results) == 1
                ):
                    continue
                return False
            if succ.kind == "cond":
                return False
            op = _op(succ)
            if op is not None and not (
                irm.is_move_to_device(op) or is_bitcast_like(op, self.target) or op.name in BETWEEN_SLICE_AND_MOVE
            ):
                return False
        return True

    def _check_buffer_comes_from_broadcast(self, seed: Seed, dus: ir.Operation) -> Failure | None:
        """``CreateAllocateBufferForDynamicUpdateSlice``: walk up from the buffer to a broadcast."""
        if dus in self.allocated_buffers:
            return None
        queue: deque[tuple[ir.Value[Any], tuple[int, ...]]] = deque([(dus.operands[0], ())])
        seen: set[tuple[object, int, tuple[int, ...]]] = set()
        found = False
        while queue:
            value, path = queue.popleft()
            owner = _owner(value)
            key = (owner, _value_number(value), path)
            if key in seen:
                continue
            seen.add(key)
            if isinstance(owner, ir.Operation) and owner.name in ("stablehlo.broadcast_in_dim", "stablehlo.broadcast"):
                found = True
                continue
            if isinstance(owner, ir.Operation) and _starts_buffer(owner):
                self.allocated_buffers.add(owner)
            if owner == self.main_block:
                number = ir.BlockArgument(value).arg_number
                if self.view.args[number].in_host_memory_space:
                    found = True
                    continue
                return Failure(seed, dus, xla_messages.DUS_DEVICE_PARAMETER, parameter=number)
            predecessors, failure = self._predecessors(seed, value, path)
            if failure:
                return failure
            queue.extend(predecessors)
        if found:
            return None
        return Failure(seed, dus, xla_messages.DUS_NOT_BROADCAST)

    def _predecessors(
        self, seed: Seed, value: ir.Value[Any], path: tuple[int, ...]
    ) -> tuple[list[tuple[ir.Value[Any], tuple[int, ...]]], Failure | None]:
        owner = _owner(value)
        if isinstance(owner, ir.Block):
            number = ir.BlockArgument(value).arg_number
            parent = owner.owner.operation
            if parent.name == "func.func":
                calls = self.view.call_sites.get(irm.symbol_name(parent), ())
                return [(call.operands[number], path) for call in calls], None
            if parent.name == "stablehlo.while":
                failure = self._check_while_condition(seed, parent, number)
                return [(parent.operands[number], path)], failure
            if parent.name == "sdy.manual_computation":
                return [(parent.operands[number], path)], None
            return [], None
        op = owner
        number = ir.OpResult(value).result_number
        name = op.name
        if name == "stablehlo.get_tuple_element":
            return [(op.operands[0], (irm.tuple_index(op),) + path)], None
        if name == "stablehlo.tuple" and path:
            return [(op.operands[path[0]], path[1:])], None
        if name == "func.call":
            callee = self.view.functions.get(irm.callee_name(op))
            return ([(_terminator(callee.regions[0].blocks[0]).operands[number], path)] if callee else []), None
        if name == "stablehlo.while":
            return [(_terminator(op.regions[1].blocks[0]).operands[number], path)], None
        if name == "stablehlo.optimization_barrier":
            return [(op.operands[number], path)], None
        if name in ("stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice", "stablehlo.pad") or _starts_buffer(op):
            return [(op.operands[0], path)], None
        if len(op.operands) == 1:
            return [(op.operands[0], path)], None
        return [], None

    def _check_while_condition(self, seed: Seed, loop: ir.Operation, number: int) -> Failure | None:
        """A host buffer carried by a loop may only be moved around, never computed on, in its
        condition. Not on the generations that abort when a walk reaches a condition's root
        (``XlaGeneration.while_condition_on_host_aborts``): there the abort is what the compilers
        were measured to give (libtpu 0.0.42.1 and the CUDA plugin 0.10.2 on the
        ``while_condition_on_host`` probe, whose body's update XLA handles before the entry's
        move of the buffer)."""
        if self.xla.while_condition_on_host_aborts:
            return None
        condition_argument = Node("arg", loop.regions[0].blocks[0], number)
        for node in self._breadth_first([condition_argument], lambda _: True):
            op = _op(node)
            if op is not None and op.name not in PURE_MEMORY_OPS and not is_bitcast_like(op, self.target):
                return Failure(seed, op, xla_messages.WHILE_CONDITION_COMPUTE)
        return None


def _aliased_into_one_of_several(node: Node) -> bool:
    """A result of a custom call with several results (a Pallas kernel's output tuple) that a
    host value reached through the call's ``output_operand_aliases``."""
    op = node.owner
    return (
        node.kind == "res"
        and not node.path
        and op.name == "stablehlo.custom_call"
        and len(op.results) > 1
        and not (irm.is_move_to_host(op) or irm.is_move_to_device(op))
    )


def op_role(op: ir.Operation, target: str) -> str:
    """What the walk makes of an instruction on a host path, in the words a trace shows."""
    if irm.is_move_to_host(op):
        return Role.MOVE_TO_HOST
    if irm.is_move_to_device(op):
        return Role.MOVE_TO_DEVICE
    if _is_host_computation(op):
        return Role.HOST_COMPUTATION
    if _starts_buffer(op) or op.name in PURE_MEMORY_OPS or is_bitcast_like(op, target):
        return Role.MEMORY_OP
    return Role.HOST_COMPUTE


def _op(node: Node) -> ir.Operation | None:
    """The instruction a node stands for (parameters and the entry root have none)."""
    return node.owner if node.kind in ("op", "res") else None


def _starts_buffer(op: ir.Operation) -> bool:
    """A dynamic-update-slice, or a scatter XLA rewrites into one before the host offloader
    runs (one update at a constant index with the new value replacing the old)."""
    return op.name == "stablehlo.dynamic_update_slice" or irm.is_constant_index_set_scatter(op)


def is_bitcast_like(op: ir.Operation, target: str) -> bool:
    """What XLA has turned into a bitcast (or removed) by the time the host offloader runs.

    Every reshape: layout assignment gives it layouts that make it one (no released compiler
    warns of host compute for a reshape). On TPU also every transpose, which libtpu folds
    into a layout; XLA:GPU computes a transpose on the host (and warns). A multiply by ones,
    which the algebraic simplifier removes (``x[::2] * 1.0`` moved to device is the strided
    copy every released compiler rejects, measured on all four).
    """
    if op.name == "stablehlo.reshape":
        return True
    if op.name == "stablehlo.multiply":
        return any(irm.is_splat_one(operand) for operand in op.operands)
    if op.name == "stablehlo.broadcast_in_dim":
        return irm.is_bitcast_reshape(op)
    if op.name == "stablehlo.transpose":
        return target == "tpu"
    return op.name in ("stablehlo.bitcast", "sdy.sharding_constraint", "sdy.reshard") or _is_copy_like_custom_call(op)


def _is_host_computation(op: ir.Operation) -> bool:
    """Ops JAX marked ``_xla_compute_type="host"`` (``compute_on``): XLA wraps them in an async
    host call whose body is an opaque, non-aliasing custom call, so the walk stops there (its
    results are device memory) and they are neither device compute nor a crash."""
    return irm.frontend_attribute(op, "_xla_compute_type") == "host"


def _is_copy_like_custom_call(op: ir.Operation) -> bool:
    """Sharding annotations become copies (or vanish) before the host offloader runs."""
    return irm.custom_call_target(op) in irm.SHARDING_TARGETS


def _parent(op: ir.Operation) -> ir.Operation:
    """The operation whose region holds a terminator (a return always has one)."""
    parent = op.parent
    assert parent is not None, f"{op.name} outside any region"
    return parent


def _terminator(block: ir.Block) -> ir.Operation:
    ops = block.operations
    return ops[len(ops) - 1].operation


def _owner(value: ir.Value[Any]) -> ir.Operation | ir.Block:
    """The defining operation (jaxlib >= 0.5 hands back an OpView) or block."""
    owner = value.owner
    return owner if isinstance(owner, ir.Block) else owner.operation


def _value_number(value: ir.Value[Any]) -> int:
    if isinstance(value.owner, ir.Block):
        return ir.BlockArgument(value).arg_number
    return ir.OpResult(value).result_number


def _path_to(node: Node, parents: dict[Node, Node | None]) -> list[Node]:
    path = []
    current: Node | None = node
    while current is not None:
        path.append(current)
        current = parents[current]
    return list(reversed(path))


HLO_OPCODES = {
    "stablehlo.broadcast_in_dim": "broadcast",
    "stablehlo.dot_general": "dot",
    "stablehlo.custom_call": "custom-call",
    "stablehlo.case": "conditional",
    "stablehlo.if": "conditional",
    "stablehlo.optimization_barrier": "opt-barrier",
    "func.call": "call",
    "func.return": "tuple",
    "stablehlo.exponential": "exponential",
}


def hlo_name(op: ir.Operation) -> str:
    """The opcode XLA would print for the instruction this op becomes (without its ``.N``)."""
    if op.name in HLO_OPCODES:
        return HLO_OPCODES[op.name]
    return op.name.split(".", 1)[-1].replace("_", "-")
