"""What one call of a lowered program copies between host and device memory: every move to host
or to device (``annotate_device_placement``), times the trips of the loops around it, and each
host output the program computes on device (XLA writes it back to host). A host argument passed
through to a host output unchanged moves nothing; host compute reads host memory where it is.

It is what a fix's cost line says per call (``8.0 MiB moved host<->device per call``): a fix that
streams offloaded state moves all of it each step, one that keeps it on device moves none.
"""

from __future__ import annotations

from typing import Any

from jaxlib.mlir import ir

from offload_fixer.ir.module import ModuleView, callee_name, is_move_to_device, is_move_to_host, walk_operations


def bytes_moved(view: ModuleView) -> tuple[int, bool]:
    """(bytes moved between host and device by one call, whether every loop around a move had a
    trip count the module states: else the figure counts that move once per loop, a floor)."""
    moves, exact = _moves(view, view.main, 1, ())
    total = moves
    block = view.entry_block
    returned = _terminator(block).operands
    for result in view.results:
        if not result.in_host_memory_space or result.index >= len(returned):
            continue
        value = returned[result.index]
        owner = value.owner
        if isinstance(owner, ir.Block) and owner == block:
            continue  # a host argument passed through
        if not isinstance(owner, ir.Block) and is_move_to_host(owner.operation):
            continue  # counted as a move
        total += _tensor_bytes(value.type)
    return total, exact


def _moves(view: ModuleView, function: ir.Operation, times: int, calls: tuple[str, ...]) -> tuple[int, bool]:
    """Bytes the moves in ``function`` (and the functions it calls) copy when it runs ``times``."""
    total, exact = 0, True
    for op in walk_operations(function):
        if is_move_to_host(op) or is_move_to_device(op):
            trips, known = _trips_around(op)
            exact = exact and known
            total += _tensor_bytes(op.results[0].type) * trips * times
        elif op.name == "func.call":
            callee = callee_name(op)
            if callee in view.functions and callee not in calls:
                trips, known = _trips_around(op)
                inner, inner_exact = _moves(view, view.functions[callee], times * trips, (*calls, callee))
                total += inner
                exact = exact and known and inner_exact
    return total, exact


def _trips_around(op: ir.Operation) -> tuple[int, bool]:
    trips, known = 1, True
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name == "stablehlo.while":
            count = trip_count(parent)
            if count is None:
                known = False
            else:
                trips *= count
        parent = parent.parent
    return trips, known


def trip_count(loop: ir.Operation) -> int | None:
    """The trips of a ``stablehlo.while`` whose condition compares a carried counter with a
    constant (``lax.scan``, ``fori_loop`` with constant bounds: the counter starts at the
    constant it is initialised with), else ``None``."""
    condition = loop.regions[0].blocks[0]
    compare = _terminator(condition).operands[0].owner
    if isinstance(compare, ir.Block) or compare.operation.name != "stablehlo.compare":
        return None
    compare = compare.operation
    direction = str(compare.attributes["comparison_direction"])
    counter, bound = compare.operands[0], compare.operands[1]
    limit = _constant_int(bound)
    if limit is None or not isinstance(counter.owner, ir.Block):
        return None
    start = _constant_int(loop.operands[ir.BlockArgument(counter).arg_number])
    if start is None:
        return None
    if "LT" in direction:
        return max(limit - start, 0)
    if "LE" in direction:
        return max(limit - start + 1, 0)
    return None


def _constant_int(value: Any) -> int | None:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "stablehlo.constant":
        return None
    try:
        elements = ir.DenseIntElementsAttr(owner.operation.attributes["value"])
    except (ValueError, TypeError):
        return None
    if not elements.is_splat:
        return None
    return int(ir.IntegerAttr(elements.get_splat_value()).value)


def _terminator(block: ir.Block) -> ir.Operation:
    return list(block.operations)[-1].operation


def _tensor_bytes(type_: ir.Type) -> int:
    try:
        tensor = ir.RankedTensorType(type_)
    except (ValueError, TypeError):
        return 0
    count = 1
    for size in tensor.shape:
        count *= size
    bits = _bits(tensor.element_type)
    return count * bits // 8


def _bits(element: ir.Type) -> int:
    for kind in (ir.IntegerType, getattr(ir, "FloatType", None)):
        if kind is None:
            continue
        try:
            width = getattr(kind(element), "width", None)
        except (ValueError, TypeError):
            continue
        if width is not None:
            return int(width)
    return 32
