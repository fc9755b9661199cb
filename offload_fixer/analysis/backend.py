"""What the released compilers' backends fail on after the host offloader has accepted a module.

The host offloader decides where values live; the TPU and GPU backends then have to build
what it decided, and some of it they cannot build. These are measured facts about released
compilers, not rules of XLA's sources: each check below names the programs that pinned it
(``tests/xla/probes/``), and the fidelity tests hold every one against the compilers.

* GPU: a dot computed in host memory (XLA:GPU emits it as a GEMM fusion whose shape loses the
  host memory space: ``INTERNAL: Fused computation shape ... S(5)``); a single-update scatter
  that is not a plain constant-index set, on a value moved to host outside any loop (rewritten
  into a dynamic slice and a select whose tuple loses the memory space, or a dynamic update
  slice from host to device memory that its verifier rejects).
* TPU: a dot in a loop body with an operand in device memory (the host-compute alias
  assigner aborts on a CHECK); a gather, or a scatter of several updates, in host memory
  (emitted as a custom fusion without a backend config); an ``unpinned_host`` parameter that
  is computed on (a fusion whose parameter shape disagrees with its operand); an
  ``unpinned_host`` output fed from device memory (``Unimplemented DMA from hbm to hbm``); on
  libtpu 0.0.42.1, a slice copied from host to device, or an update copied from device into
  a host buffer, that takes part of more than one dimension (an async slice takes one), or
  an update that takes part of the lanes alone; on libtpu 0.0.50.1, such a copy of part of
  the lanes that is not a multiple of 128 (for a slice, with part of the sublanes too).
* Both: an output that reuses a donated argument's buffer (``tf.aliasing_output``) in another
  memory than the output is declared in: a device buffer for a host output (libtpu: ``DMA
  from hbm to hbm``; XLA:GPU: a copy-start without the host memory space), and on TPU a
  ``pinned_host`` buffer for a device output (``DMA from host to host``).
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
from offload_fixer.model import DEVICE_KINDS, HOST_KINDS, HOST_MEMORY_SPACE_KINDS, UNPINNED_HOST

# What each backend failure is, by the message the compiler fails with.
GPU_HOST_DOT = msg.FUSION_SHAPE
GPU_HOST_SCATTER = msg.HOST_TUPLE_SHAPE
TPU_LOOP_DOT = msg.HOST_COMPUTE_ALIAS
TPU_HOST_CUSTOM_FUSION = msg.CUSTOM_FUSION_BACKEND_CONFIG
TPU_UNPINNED_PARAMETER = msg.UNPINNED_PARAMETER
TPU_UNPINNED_OUTPUT = msg.UNPINNED_OUTPUT
TPU_ASYNC_SLICE = msg.ASYNC_SLICE_DIMENSIONS
TPU_ASYNC_UPDATE_LANE_SLICE = msg.ASYNC_UPDATE_LANE_SLICE
TPU_LANE_SLICE_SIZE = msg.LANE_SLICE_SIZE
LANE_COUNT = 128
"""Lanes of a TPU vector register: the last dimension's tile."""
TPU_DONATED_DEVICE_BUFFER = msg.DONATED_DEVICE_BUFFER
TPU_DONATED_HOST_BUFFER = msg.DONATED_HOST_BUFFER
GPU_DONATED_DEVICE_BUFFER = msg.GPU_DONATED_DEVICE_BUFFER
TPU_NESTED_STACK = msg.NESTED_STACK_HOST_CALL
GPU_NESTED_STACK = msg.GPU_NESTED_STACK

DOTS = frozenset({"stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution"})


def backend_failures(walk: HostOffloadWalk, result: WalkResult, target: str) -> list[Failure]:
    """Failures of ``target``'s backend, in the order it meets them (host compute, then the
    entry parameters and outputs)."""
    seeds: dict[ir.Operation, Seed] = {}
    for seed, ops in result.host_compute.items():
        for op in ops:
            seeds.setdefault(op, seed)
    failures: list[Failure] = []
    for op in dict.fromkeys(op for ops in result.host_compute.values() for op in ops):
        message = _host_compute_failure(walk.view, op, result, target, seeds[op])
        if message is not None:
            failures.append(Failure(seeds[op], op, message))
    failures.extend(_nested_stack_failures(walk, result, target))
    if target == "tpu":
        failures.extend(_async_slice_failures(walk, result))
        failures.extend(_lane_slice_failures(walk, result))
        failures.extend(_unpinned_failures(walk, result))
    failures.extend(_donation_failures(walk.view, target, {reach.output for reach in result.reaches}))
    return failures


def _nested_stack_failures(walk: HostOffloadWalk, result: WalkResult, target: str) -> Iterator[Failure]:
    """An outer loop that stacks, into a host buffer it carries, a host value an inner loop
    returned (nested scans whose ys are moved to host: a remat offload policy inside nested
    scans under ``grad``; the ``nested_scan_*`` probes). XLA:GPU loses the host memory space
    in the outer loop's tuple whatever reads the stack; libtpu compiles the stack but not host
    compute that reads it (a slice kept on host, or compute), whose async host call finds the
    buffer without its host layout. One stacked at the top level, or a stack of a value moved
    to host in the same loop body, compiles on both."""
    for seed, ops in result.host_updates.items():
        if seed.op is None:
            continue
        depth = _loop_depth(walk.view, seed.op)
        for op in ops:
            if not 1 <= _loop_depth(walk.view, op) < depth or not _on_host_path(op.operands[1], result):
                continue
            if target == "gpu":
                yield Failure(seed, op, GPU_NESTED_STACK)
            elif result.host_slices.get(seed) or result.host_compute.get(seed):
                yield Failure(seed, op, TPU_NESTED_STACK)
            break


def _loop_depth(view: irm.ModuleView, op: ir.Operation, seen: frozenset[str] = frozenset()) -> int:
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
    calls = view.call_sites.get(name, ())
    return depth + max((_loop_depth(view, call, seen | {name}) for call in calls), default=0)


def _donation_failures(view: irm.ModuleView, target: str, reached: set[int]) -> Iterator[Failure]:
    """Outputs that reuse a donated argument's buffer in another memory than they are declared
    in (the ``donated_*`` probes). XLA:GPU keeps ``unpinned_host`` as host memory; libtpu, whose
    ``unpinned_host`` is S(6), fails on those through :func:`_unpinned_failures` instead. An
    output a host value reaches (``reached``) fails first in the host offloader, with error 1200
    (the catalogue's ``host_in_shardings_double_donated``, both compilers)."""
    host_kinds = HOST_KINDS if target == "gpu" else HOST_MEMORY_SPACE_KINDS
    for output in view.results:
        donor = view.aliased_outputs.get(output.index)
        if donor is None or output.index in reached:
            continue
        argument = view.args[donor].memory_kind
        if output.memory_kind in host_kinds and argument in DEVICE_KINDS:
            message = GPU_DONATED_DEVICE_BUFFER if target == "gpu" else TPU_DONATED_DEVICE_BUFFER
            yield Failure(None, None, message, parameter=donor)
        elif (
            target == "tpu"
            and output.memory_kind in DEVICE_KINDS
            and argument in HOST_MEMORY_SPACE_KINDS
            and _updated_in_place(view, output.index, donor)
        ):
            yield Failure(None, None, TPU_DONATED_HOST_BUFFER, parameter=donor)


IN_PLACE_UPDATES = frozenset({"stablehlo.dynamic_update_slice", "stablehlo.scatter"})


def _updated_in_place(view: irm.ModuleView, output: int, donor: int) -> bool:
    """Whether output ``output`` is an update written into the donated argument ``donor``
    itself (the ``donated_host_buffer_to_device_output`` probe). A device output computed from
    a copy of the donated host value compiles on libtpu 0.0.42.1 and 0.0.50.1 (the
    ``moments_on_host`` training package fixed by a move to device)."""
    block = view.entry_block
    returned = list(block.operations)[-1].operands[output]
    owner = _defining_op(returned)
    while owner is not None and owner.name == "stablehlo.custom_call" and len(owner.operands) == 1:
        owner = _defining_op(owner.operands[0])  # JAX's placement annotation of the output
    if owner is None or owner.name not in IN_PLACE_UPDATES:
        return False
    return bool(owner.operands[0] == block.arguments[donor])


def _defining_op(value: ir.Value[Any]) -> ir.Operation | None:
    """The operation that defines ``value`` (None for a block argument)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if isinstance(owner, ir.OpView) else owner


def _async_slice_failures(walk: HostOffloadWalk, result: WalkResult) -> Iterator[Failure]:
    """Slices copied from host to device, and updates written from device into host buffers,
    that take part of more than one dimension, on the libtpu generations whose async slice
    takes one (the ``slice_two_dimensions`` and ``update_two_dimensions`` probes)."""
    if not walk.xla.tpu_async_slice_one_dimension_only:
        return
    for seed, op in _copies(result):
        if len(_partial_dimensions(op)) > 1 and not _strided(op):
            yield Failure(seed, op, TPU_ASYNC_SLICE)


def _lane_slice_failures(walk: HostOffloadWalk, result: WalkResult) -> Iterator[Failure]:
    """Copies between host and device of part of the lane (last) dimension that libtpu cannot
    make (the ``lane_*`` probes): on libtpu 0.0.42.1 an update into a host buffer that takes
    part of the lanes alone (two partial dimensions are the async-slice failure already); on
    libtpu 0.0.50.1 a lane part that is not a multiple of 128, in an update into a host buffer,
    or in a slice copied to device that also takes part of the sublane dimension."""
    xla = walk.xla
    for seed, op in _copies(result):
        partial = _partial_dimensions(op)
        if not partial or _strided(op):
            continue
        rank = len(ir.RankedTensorType(op.results[0].type).shape)
        lane = rank - 1
        update = op.name == "stablehlo.dynamic_update_slice"
        if xla.tpu_async_update_lane_slice_fails and update and partial == [lane]:
            yield Failure(seed, op, TPU_ASYNC_UPDATE_LANE_SLICE)
        elif (
            xla.tpu_lane_slice_multiple_of_lane_count
            and lane in partial
            and _piece_shape(op)[lane] % LANE_COUNT
            and (update or rank - 2 in partial)
        ):
            yield Failure(seed, op, TPU_LANE_SLICE_SIZE)


def _copies(result: WalkResult) -> Iterator[tuple[Seed, ir.Operation]]:
    """Each slice copied to device and each update into a host buffer, once, with its seed."""
    seen: set[ir.Operation] = set()
    for found in (result.copied_slices, result.host_updates):
        for seed, ops in found.items():
            for op in ops:
                if op not in seen:
                    seen.add(op)
                    yield seed, op


def _strided(op: ir.Operation) -> bool:
    """A slice with a stride other than 1 (``x[::40, 0]``): libtpu 0.0.42.1 fails on it with
    another, unmodelled error (a shape mismatch after optimisation), so it is not predicted."""
    return "strides" in op.attributes and any(stride != 1 for stride in ir.DenseI64ArrayAttr(op.attributes["strides"]))


def _piece_shape(op: ir.Operation) -> list[int]:
    """The shape of what is copied: a slice's result, a dynamic-update-slice's update."""
    value = op.operands[1] if op.name == "stablehlo.dynamic_update_slice" else op.results[0]
    return list(ir.RankedTensorType(value.type).shape)


def _partial_dimensions(op: ir.Operation) -> list[int]:
    """The dimensions a slice (or an update) takes less than the whole of."""
    whole = ir.RankedTensorType(op.operands[0].type).shape
    return [dim for dim, (w, p) in enumerate(zip(whole, _piece_shape(op))) if p != w]


def _host_compute_failure(
    view: irm.ModuleView, op: ir.Operation, result: WalkResult, target: str, seed: Seed
) -> msg.XlaMessage | None:
    name = op.name
    if target == "gpu":
        if name in DOTS:
            return GPU_HOST_DOT
        if (
            name == "stablehlo.scatter"
            and _single_update(op)
            and not irm.is_constant_index_set_scatter(op)
            and seed.kind == "move_to_host"
            and not _in_loop_body(view, op)
        ):
            # A host parameter updated so, or a host buffer updated in a loop body, compiles
            # (the ``scatter_into_host_parameter`` and ``scatter_in_scan_into_host_buffer`` probes).
            return GPU_HOST_SCATTER
        return None
    if name in DOTS and _in_loop_body(view, op) and any(not _on_host_path(value, result) for value in op.operands):
        return TPU_LOOP_DOT
    if name == "stablehlo.gather" or (name == "stablehlo.scatter" and not _single_update(op)):
        return TPU_HOST_CUSTOM_FUSION
    return None


def _unpinned_failures(walk: HostOffloadWalk, result: WalkResult) -> Iterator[Failure]:
    for arg in walk.view.args:
        if arg.memory_kind == UNPINNED_HOST:
            op = _first_compute_user(walk, Node("arg", walk.main_block, arg.index))
            if op is not None:
                yield Failure(None, op, TPU_UNPINNED_PARAMETER, parameter=arg.index)
    if not walk.xla.tpu_unpinned_output_from_device_fails:
        return
    reached = {reach.output for reach in result.reaches}
    for output in walk.view.results:
        if output.memory_kind == UNPINNED_HOST and output.index not in reached:
            yield Failure(None, None, TPU_UNPINNED_OUTPUT, parameter=output.index)


def _first_compute_user(walk: HostOffloadWalk, start: Node) -> ir.Operation | None:
    """The first instruction past pure memory operations that computes on ``start``'s value."""

    def passes(node: Node) -> bool:
        op = node.owner if node.kind in ("op", "res") else None
        return node.kind == "arg" or (
            op is not None and (op.name in PURE_MEMORY_OPS or is_bitcast_like(op, walk.target))
        )

    for node in walk._breadth_first(walk.successors(start), passes):
        if node.kind in ("op", "res") and not passes(node):
            op: ir.Operation = node.owner
            return op
    return None


def _single_update(op: ir.Operation) -> bool:
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


def _in_loop_body(view: irm.ModuleView, op: ir.Operation, seen: frozenset[str] = frozenset()) -> bool:
    """Inside a while body, directly or through the functions JAX calls from one (a scan's
    body is a private function called in the loop)."""
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name == "stablehlo.while":
            return True
        parent = parent.parent
    if parent is None:
        return False
    name = irm.symbol_name(parent)
    if name in seen:
        return False
    return any(_in_loop_body(view, call, seen | {name}) for call in view.call_sites.get(name, ()))


def _on_host_path(value: ir.Value[Any], result: WalkResult) -> bool:
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
        node.kind in ("op", "res") and node.owner == op and (node.index in (None, number)) for node in result.host_nodes
    )
