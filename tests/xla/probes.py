"""Programs that pin what the released compilers do where XLA's sources say otherwise.

Each probe is a small jitted program and what libtpu and the CUDA plugin were measured to
do with it (``compiled``, ``E1200`` or ``other``: another rejection or an abort). The model's
corrections (``offload_fixer/analysis``, ``docs/xla-host-offloader.md``) rest on them:
``tests/xla/test_probes.py`` holds the analysis to each expectation on every machine, and
``tests/xla/test_fidelity.py`` holds the expectation, and the analysis, to the compilers
wherever they are installed.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

COMPILED, E1200, OTHER = "compiled", "E1200", "other"
DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count=8"
"""The CPU devices the mesh probes are sharded over; they skip without it. Not set for the
whole suite: the examples build their meshes over ``jax.devices()`` and would become 8-device
programs."""
REQUIRE_COMPILERS = "OFFLOAD_FIXER_REQUIRE_COMPILERS"
"""Where it names ``tpu`` (``tests/conftest.py``), probes that cannot get their TPU devices fail."""
TOPOLOGY = "v5e:2x4"
"""The compile-only TPU topology (libtpu) whose devices the probes are built over where JAX's
CPU backend has no ``pinned_host`` memory (JAX before 0.7): its devices have it, and its 8
chips hold every mesh probe. Lowering names no device, only their number, so the module is
the one a CPU device would give."""


@dataclass(frozen=True)
class Probe:
    name: str
    why: str
    fn: Callable[..., Any]
    args: Callable[[], tuple[Any, ...]]
    expect: dict[str, str]
    """Target (``tpu``/``gpu``) -> the compile outcome the released compilers give."""
    jit: Callable[[], dict[str, Any]] = dict
    typed_only: bool = False
    """The program needs memory spaces in types (JAX >= 0.7.1)."""
    unless: Callable[[Any], dict[str, str] | None] | None = None
    """For an ``XlaGeneration`` that decides otherwise: the outcomes it gives instead."""
    devices: int = 1
    """Devices of the mesh the program is sharded over (``mhlo.num_partitions``)."""
    names: dict[str, str] | None = None
    """Target -> the instruction XLA's error 1200 starts from (``starting from X``), measured
    on libtpu 0.0.42.1 and 0.0.50.1 and the CUDA plugins 0.10.2 and 0.12.0.1."""
    names_unless: Callable[[Any], dict[str, str] | None] | None = None
    """For an ``XlaGeneration`` whose message names another instruction: the names it gives instead."""
    first_output: int | None = None
    """The output XLA's error 1200 trace ends at (its first error), where several are reached."""
    first_output_unless: Callable[[Any], int | None] | None = None
    """For an ``XlaGeneration`` whose trace ends at another output: that output."""
    does_nothing: tuple[str, ...] = ()
    """Targets whose compiled program keeps none of the program's moves to host in host memory
    (OFL1211: 0 host output bytes for the outputs they reach, or 0 host bytes at all): JAX
    moves a host value back to device for a device output (JAX 0.6.2 too where the output is
    declared device memory: ``root_move`` on libtpu 0.0.17.1)."""


def both(outcome: str) -> dict[str, str]:
    return {"tpu": outcome, "gpu": outcome}


# -- shardings and shapes, built lazily (they need a live backend) -------------------------
@functools.cache
def _topology_devices() -> tuple[tuple[Any, ...], str | None]:
    """``TOPOLOGY``'s compile-only devices, or none and why libtpu could not give them."""
    from offload_fixer import jax_compat

    # the oracle's compiler processes hold libtpu too (offload_fixer.xla.worker)
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    try:
        return tuple(jax_compat.compile_only_devices("tpu", TOPOLOGY)), None
    except Exception as exc:  # noqa: BLE001 - no libtpu, or one that refuses the topology: the skip says so
        return (), f"{type(exc).__name__}: {exc}".splitlines()[0]


def on_topology() -> bool:
    """Whether the probes are built over ``TOPOLOGY``'s devices: where the CPU backend has no
    ``pinned_host`` memory for their shardings."""
    from offload_fixer import jax_compat

    return not jax_compat.host_memory_on_this_backend()


def probe_devices() -> list[Any]:
    """The devices the probes' shardings name: the CPU backend's, or ``TOPOLOGY``'s."""
    import jax

    return list(_topology_devices()[0]) if on_topology() else jax.devices()


def _first() -> Any:
    return probe_devices()[0]


def host():
    import jax

    return jax.sharding.SingleDeviceSharding(_first(), memory_kind="pinned_host")


def unpinned():
    import jax

    return jax.sharding.SingleDeviceSharding(_first(), memory_kind="unpinned_host")


def device():
    import jax

    return jax.sharding.SingleDeviceSharding(_first(), memory_kind="device")


def _move(memory_kind: str) -> Any:
    import jax

    from offload_fixer.jax_compat import memory_move_target

    if on_topology():
        return jax.sharding.SingleDeviceSharding(_first(), memory_kind=memory_kind)
    return memory_move_target(memory_kind)


def host_move():
    return _move("pinned_host")


def unpinned_move():
    return _move("unpinned_host")


def device_move():
    return _move("device")


def shapes(*dims: tuple[int, ...], dtype: str = "float32") -> Callable[[], tuple[Any, ...]]:
    def build() -> tuple[Any, ...]:
        import jax
        import jax.numpy as jnp

        return tuple(jax.ShapeDtypeStruct(d, getattr(jnp, dtype)) for d in dims)

    return build


def index_arg() -> Any:
    import jax
    import jax.numpy as jnp

    return jax.ShapeDtypeStruct((), jnp.int32)


def mesh(devices: int):
    """A ("data", "model") mesh of ``devices`` of the probes' devices, 2 along data."""
    import jax
    import numpy as np

    return jax.sharding.Mesh(np.array(probe_devices()[:devices]).reshape(2, devices // 2), ("data", "model"))


def on_mesh(devices: int, spec: tuple[Any, ...] = (), memory_kind: str = "device"):
    import jax

    return jax.sharding.NamedSharding(mesh(devices), jax.sharding.PartitionSpec(*spec), memory_kind=memory_kind)


COLUMNS = (None, "model")


V = (8, 128)
M = (128, 128)
LAYERS = (3, 128, 128)
STACK = (4, 4, 64, 128)
CACHE, BLOCK = (16, 8, 128), (1, 8, 128)


# -- the programs ----------------------------------------------------------------------------
def _put(x, target):
    import jax

    return jax.device_put(x, target)


def root_move(x):
    return _put(x, host_move())


def root_unpinned_move(x):
    return _put(x, unpinned_move())


def tuple_unpinned_move(x):
    return _put(x, unpinned_move()), x


def unpinned_move_times_two(x):
    return _put(x, unpinned_move()) * 2, x


def host_move_times_two(x):
    return _put(x, host_move()) * 2, x


def times_two(x):
    return x * 2


def identity_pair(x, y):
    return x, y + 1


def slice_returned(x):
    return x[0:4]


def slice_in_tuple(x, y):
    return x[0:4], y


def slice_then_multiply(x):
    return x[0:4] * 2


def dynamic_slice_returned(x, i):
    from jax import lax

    return lax.dynamic_slice_in_dim(x, i, 4)


def reshape_returned(x):
    return x.reshape(1024)


def transpose_of_move(x):
    return _put(x, host_move()).T, x


def constant_index_set(x):
    return _put(x, host_move()).at[0].set(1.0), x


def dynamic_index_set(x, i):
    return _put(x, host_move()).at[i].set(1.0), x


def accumulate_at_index(x):
    return _put(x, host_move()).at[0].add(1.0), x


def set_row(x, i, row):
    return x.at[i].set(row)


def scatter_host_indices(buffer, rows, values):
    """The buffer moved to device, its rows (host indices) left host: the wrap of negative
    indices (``lt``, ``add``, ``select``) is host compute that feeds a device scatter."""
    return _put(buffer, device_move()).at[rows].set(values)


def host_index_count(buffer, rows):
    return buffer, (rows < 8).sum()


def clamped_host_index_slice(x, i):
    import jax.numpy as jnp
    from jax import lax

    return lax.dynamic_slice_in_dim(x, jnp.clip(i, 0, 3), 4)


def clamped_host_index_update(x, i, row):
    import jax.numpy as jnp
    from jax import lax

    return lax.dynamic_update_slice_in_dim(x, row, jnp.clip(i, 0, 15), 0)


def dynamic_index_set_alone(x, i):
    return _put(x, host_move()).at[i].set(1.0)


def scatter_in_scan(x, rows, values):
    import jax.numpy as jnp
    from jax import lax

    buffer = _put(jnp.zeros_like(x), host_move())
    return lax.scan(lambda b, k: (b.at[rows[k]].add(values[k]), None), buffer, jnp.arange(rows.shape[0]))[0]


def set_into_fresh_buffer(x):
    import jax.numpy as jnp

    return _put(jnp.zeros_like(x), host_move()).at[0].set(x[0]), x


def while_condition_on_host(rows):
    import jax.numpy as jnp
    from jax import lax

    history = _put(jnp.zeros_like(rows), host_move())

    def keep_going(state):
        i, history = state
        return (i < rows.shape[0]) & (jnp.sum(history) < 1e6)

    def write_row(state):
        i, history = state
        row = _put(rows[i] * 2, host_move())
        return i + 1, lax.dynamic_update_slice(history, row[None], (i, 0))

    return lax.while_loop(keep_going, write_row, (0, history))[1]


def _loop_bound(h, reduce: str):
    return h.sum() if reduce == "sum" else h[0]


def _host_bound_loop(carried: bool, reduce: str):
    """A loop whose condition compares its counter with a host parameter ``h`` (summed, or an
    element of it), ``h`` carried in the loop state or closed over; it returns the loop's
    device result."""

    def run(h, x):
        from jax import lax

        if carried:
            state = lax.while_loop(
                lambda s: s[0] < _loop_bound(s[1], reduce), lambda s: (s[0] + 1, s[1], s[2] * 2), (0.0, h, x)
            )
            return state[2]
        return lax.while_loop(lambda s: s[0] < _loop_bound(h, reduce), lambda s: (s[0] + 1, s[1] * 2), (0.0, x))[1]

    return run


def host_bound_loop_moved_to_device(h, x):
    return _put(_host_bound_loop(carried=True, reduce="sum")(h, x), device_move())


def moved_bound_loop(x):
    """The loop bound is a value moved to host inside the program, closed over."""
    from jax import lax

    h = _put(x * 3, host_move())
    return lax.while_loop(lambda s: s[0] < h.sum(), lambda s: (s[0] + 1, s[1] * 2), (0.0, x))[1]


def matmul(w, x):
    return x @ w


def scan_layers(w, x):
    import jax.numpy as jnp
    from jax import lax

    def layer(h, wi):
        return jnp.tanh(h @ wi), None

    return lax.scan(layer, x, w)[0]


def _layers_loss(move: Callable[[], Any] | None):
    """The mean square of a scan over stacked layers, each moved to ``move()`` in the scan's
    body (or left where it is); JAX slices the stack through one ``dynamic_index_in_dim``
    function, called by the forward loop on the stack and by the backward loop on the
    residuals it saved."""

    def loss(w, x):
        import jax.numpy as jnp
        from jax import lax

        def layer(h, wi):
            wi = wi if move is None else _put(wi, move())
            return jnp.tanh(h @ wi), None

        return jnp.mean(lax.scan(layer, x, w)[0] ** 2)

    return loss


def _layers_grad(move: Callable[[], Any] | None):
    def grad(w, x):
        import jax

        return jax.grad(_layers_loss(move))(w, x)

    return grad


def streamed_layers_sgd(w, x):
    """``tests/fixes/quality/scan_stream_layers_mesh8_params_out.py`` fixed slice by slice
    (``jax.device_put(w, jax.memory.Space.Device)``, JAX >= 0.7.1)."""
    import jax

    loss, g = jax.value_and_grad(_layers_loss(lambda: jax.memory.Space.Device))(w, x)
    return w - 0.1 * g, loss


def loop_over_host_weights(w, x):
    from jax import lax

    return lax.fori_loop(0, 3, lambda i, h: h @ w, x)


def loop_on_host_carry(w):
    from jax import lax

    return lax.fori_loop(0, 3, lambda i, h: h @ h, w)


def elementwise_carry(w):
    from jax import lax

    return lax.scan(lambda c, _: (c * 2, None), w, None, length=3)[0]


def tile_of_stack(stack, i):
    import jax.lax as lax

    return _put(lax.dynamic_slice(stack, (i, i, 0, 0), (1, 1, 64, 128)), device_move())


def row_of_stack(stack, i):
    import jax.lax as lax

    return _put(lax.dynamic_slice(stack, (i, 0, 0, 0), (1, 4, 64, 128)), device_move())


def tile_in_nested_scans(stack, x):
    import jax.lax as lax
    import jax.numpy as jnp

    def outer(h, i):
        def inner(h, j):
            return h + _put(lax.dynamic_slice(stack, (i, j, 0, 0), (1, 1, 64, 128)), device_move())[0, 0], None

        return lax.scan(inner, h, jnp.arange(4))[0], None

    return lax.scan(outer, x, jnp.arange(4))[0]


def write_block(cache, block, i):
    from jax import lax

    return lax.dynamic_update_slice(cache, block, (i, 0, 0))


def state_step_beside_passthrough(state, other):
    """Host state moved to device and updated, returned after another, unchanged argument."""
    return other, _put(state, device_move()) * 0.9 + other * 0.1


def state_step_beside_computed(state, other):
    """As :func:`state_step_beside_passthrough`, the other output computed."""
    return other * 2, _put(state, device_move()) * 0.9 + other * 0.1


def write_block_then_offload(cache, block, i):
    return _put(write_block(cache, block, i), host_move())


def _update_of(buffer, piece, start):
    """Write ``piece`` (moved to host) into a fresh host buffer of shape ``buffer`` at ``start``."""

    def update(x, i):
        import jax.lax as lax
        import jax.numpy as jnp

        history = _put(jnp.zeros(buffer), host_move())
        return lax.dynamic_update_slice(history, _put(x, host_move()), tuple(i if s else 0 for s in start))

    return update, lambda: (*shapes(piece)(), index_arg())


def write_at(position_dimension: int):
    """Write ``update`` into the host buffer ``buffer`` at ``position`` along one dimension."""

    def write(buffer, update, position):
        from jax import lax

        start = tuple(position if dim == position_dimension else 0 for dim in range(buffer.ndim))
        return lax.dynamic_update_slice(buffer, update, start)

    return write


def _buffer_update(buffer: tuple[int, ...], update: tuple[int, ...]) -> Callable[[], tuple[Any, ...]]:
    return lambda: (*shapes(buffer, update)(), index_arg())


def sgd_bias(b, g):
    return b - 0.1 * g


def lanes_in_scan(x):
    import jax.lax as lax
    import jax.numpy as jnp

    history = _put(jnp.zeros((16, 128)), host_move())

    def step(carry, i):
        total, history = carry
        half = _put(lax.dynamic_slice(x, (i, 0), (1, 64)), host_move())
        return (total + 1.0, lax.dynamic_update_slice(history, half, (i, 0))), None

    return lax.scan(step, (0.0, history), jnp.arange(16))[0]


def _slice_of(piece, start):
    def take(stack, i):
        import jax.lax as lax

        return _put(lax.dynamic_slice(stack, tuple(i if s else 0 for s in start), piece), device_move())

    return take


def moments_step(mu, grad):
    import jax.numpy as jnp

    mu = 0.9 * mu + 0.1 * grad
    return _put(mu, host_move()), jnp.sum(grad * grad)


def rows_to_host_in_scan(xs):
    import jax.numpy as jnp
    from jax import lax

    return lax.scan(lambda total, x: (total + x, _put(x * 2, host_move())), jnp.zeros(xs.shape[1:]), xs)


def round_trip(x):
    return _put(_put(x * 2, host_move()), device_move()) + 1


def _offload_across_compute(barrier: bool):
    def offload(a, w):
        import jax.numpy as jnp
        from jax import lax

        h = _put(jnp.tanh(a), host_move())
        if barrier:
            h, a, w = lax.optimization_barrier((h, a, w))
        return _put(h, device_move()) * jnp.tanh(jnp.tanh(a @ w) @ w)

    return offload


def streamed_weights(w, x):
    return _put(w, device_move()) * x


def _remat_grad(offloaded: tuple[str, ...]):
    def grad(w, x):
        import jax
        import jax.numpy as jnp
        from jax.ad_checkpoint import checkpoint_name

        def mlp(w, x):
            return jnp.sum(jnp.tanh(checkpoint_name(jnp.tanh(x @ w), "act") @ w))

        policy = jax.checkpoint_policies.save_and_offload_only_these_names(
            names_which_can_be_saved=[],
            names_which_can_be_offloaded=list(offloaded),
            offload_src="device",
            offload_dst="pinned_host",
        )
        return jax.grad(jax.checkpoint(mlp, policy=policy))(w, x)

    return grad


def update(w, g):
    return w - 0.1 * g


def update_after_loop(g, w):
    from jax import lax

    return lax.fori_loop(0, 3, lambda i, h: h * 2, g), w + 1


def _shard_map_update(devices: int):
    def step(w, g):
        from jax.sharding import PartitionSpec

        from offload_fixer.jax_compat import shard_map_function

        spec = PartitionSpec(*COLUMNS)
        return shard_map_function()(lambda a, b: a - b, mesh=mesh(devices), in_specs=(spec, spec), out_specs=spec)(w, g)

    return step


def difference_and_sum(w, g):
    return w - g, w + g


def _shard_map_two_outputs(devices: int):
    def step(w, g):
        from jax.sharding import PartitionSpec

        from offload_fixer.jax_compat import shard_map_function

        spec = PartitionSpec(*COLUMNS)
        body = shard_map_function()(
            difference_and_sum, mesh=mesh(devices), in_specs=(spec, spec), out_specs=(spec, spec)
        )
        return body(w, g)

    return step


def _to_unpinned_on_mesh(devices: int, times_two: bool):
    def step(x):
        moved = _put(x, on_mesh(devices, COLUMNS, "unpinned_host"))
        return (moved * 2 if times_two else moved), x

    return step


def _streamed_on_mesh(devices: int):
    def step(w, x):
        return _put(w, on_mesh(devices, COLUMNS)) * x

    return step


def _rows_stacked_in_nested_scans(xs):
    """Each (8, 128) row moved to host in an inner scan, the inner scans' stacks stacked by
    an outer scan: a (2, 3, 8, 128) host buffer the outer loop carries."""
    import jax.numpy as jnp
    from jax import lax

    def chunk(c, rows):
        return c, lax.scan(lambda c, row: (c, _put(jnp.tanh(row), host_move())), c, rows)[1]

    return lax.scan(chunk, 0.0, xs)[1]


def nested_stack_returned(xs):
    return _rows_stacked_in_nested_scans(xs)


def nested_stack_rows_to_device(xs):
    import jax.numpy as jnp
    from jax import lax

    stack = _rows_stacked_in_nested_scans(xs)
    return lax.scan(lambda h, rows: (h + _put(rows, device_move()).sum(0), None), jnp.zeros(xs.shape[2:]), stack)[0]


def nested_stack_read_on_host(xs):
    import jax.numpy as jnp
    from jax import lax

    stack = _rows_stacked_in_nested_scans(xs)

    def chunk(h, rows):  # the rows stay in host memory: the slice is host compute
        return lax.scan(lambda h, row: (h + _put(row, device_move()), None), h, rows)[0], None

    return lax.scan(chunk, jnp.zeros(xs.shape[2:]), stack)[0]


def _nested_scan_remat_offload(w, xs):
    import jax
    import jax.numpy as jnp
    from jax import lax

    def loss(w, xs):
        policy = jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host")

        def chunk(h, rows):
            step = jax.checkpoint(lambda h, x: (jnp.tanh(h @ w + x), None), policy=policy)
            return lax.scan(step, h, rows)[0], None

        return jnp.sum(lax.scan(chunk, jnp.zeros(xs.shape[2:]), xs)[0])

    return jax.grad(loss)(w, xs)


def two_scans_train_step(head, layers, x, y):
    """``examples/param_streaming_broken.py``'s step: a scan forward and one backward, whose
    bodies call other functions, on host weights; the loss is a device output."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def loss(head, layers):
        h = lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, layers)[0]
        return jnp.mean((h @ head - y) ** 2)

    value, (g_head, g_layers) = jax.value_and_grad(loss, argnums=(0, 1))(head, layers)
    return head - 0.1 * g_head, layers - 0.1 * g_layers, value


def gather_rows(w, i):
    return w[i]


def sine(w):
    import jax.numpy as jnp

    return jnp.sin(w)


def _loop_on_host_e1200(generation: Any) -> dict[str, str] | None:
    """Up to JAX 0.11 the compilers abort where a host value decides a loop's condition; JAX
    0.12's put the loop in host memory, and its device result reaches a device output (error 1200)."""
    return None if generation.while_condition_on_host_aborts else both(E1200)


_LOOP_CONDITION_PROBES = (
    Probe(
        "host_parameter_in_loop_condition_carried_sum",
        "a host parameter carried by a loop and summed in its condition: "
        "JAX 0.12's compilers put the loop in host memory (error 1200 at its device result)",
        _host_bound_loop(carried=True, reduce="sum"),
        shapes((8,), (8,)),
        both(OTHER),
        jit=lambda: {"in_shardings": (host(), device())},
        unless=_loop_on_host_e1200,
    ),
    Probe(
        "host_parameter_in_loop_condition_carried_index",
        "a host parameter carried by a loop and indexed in its condition: "
        "JAX 0.12's compilers put the loop in host memory (error 1200 at its device result)",
        _host_bound_loop(carried=True, reduce="index"),
        shapes((8,), (8,)),
        both(OTHER),
        jit=lambda: {"in_shardings": (host(), device())},
        unless=_loop_on_host_e1200,
    ),
    Probe(
        "host_parameter_in_loop_condition_closed_sum",
        "a host parameter closed over by a loop and summed in its condition: "
        "JAX 0.12's compilers put the loop in host memory (error 1200 at its device result)",
        _host_bound_loop(carried=False, reduce="sum"),
        shapes((8,), (8,)),
        both(OTHER),
        jit=lambda: {"in_shardings": (host(), device())},
        unless=_loop_on_host_e1200,
    ),
    Probe(
        "host_parameter_in_loop_condition_closed_index",
        "a host parameter closed over by a loop and indexed in its condition: "
        "JAX 0.12's compilers put the loop in host memory (error 1200 at its device result)",
        _host_bound_loop(carried=False, reduce="index"),
        shapes((8,), (8,)),
        both(OTHER),
        jit=lambda: {"in_shardings": (host(), device())},
        unless=_loop_on_host_e1200,
    ),
    Probe(
        "host_parameter_in_loop_condition_host_output",
        "a host parameter decides a loop's condition and the loop's result is a host output: "
        "JAX 0.12's backends cannot build the loop in host memory",
        _host_bound_loop(carried=True, reduce="sum"),
        shapes((8,), (8,)),
        both(OTHER),
        jit=lambda: {"in_shardings": (host(), device()), "out_shardings": host()},
    ),
    Probe(
        "host_parameter_in_loop_condition_moved_to_device",
        "a host parameter decides a loop's condition and the loop's result is moved to device: "
        "JAX 0.12's backends cannot build the loop in host memory",
        host_bound_loop_moved_to_device,
        shapes((8,), (8,)),
        both(OTHER),
        jit=lambda: {"in_shardings": (host(), device())},
    ),
    Probe(
        "moved_value_in_loop_condition",
        "a value moved to host inside the program decides a loop's condition: error 1200 from "
        "the loop's operand tuple under JAX 0.12",
        moved_bound_loop,
        shapes((8,)),
        both(OTHER),
        unless=_loop_on_host_e1200,
    ),
)
"""A host value that decides a loop's condition, without an update into a host buffer the loop
carries (``while_condition_on_host``): measured on libtpu 0.0.42.1 and 0.0.50.1 and the CUDA
plugins 0.10.2 and 0.12.0.1 (``XlaGeneration.while_condition_on_host_aborts``)."""


PROBES: tuple[Probe, ...] = (
    # root repair
    Probe(
        "root_move",
        "a move to host that is the whole single output is repaired (JAX >= 0.7.1 moves it back)",
        root_move,
        shapes(V),
        both(COMPILED),
        jit=lambda: {"out_shardings": device()},
        does_nothing=("tpu", "gpu"),
    ),
    Probe("root_unpinned_move", "repaired too, for unpinned_host", root_unpinned_move, shapes(V), both(COMPILED)),
    Probe(
        "tuple_unpinned_move",
        "in a tuple of outputs the same move is error 1200",
        tuple_unpinned_move,
        shapes(V),
        both(E1200),
        typed_only=True,
    ),
    Probe(
        "unpinned_move_times_two",
        "a move to unpinned_host is a move to host",
        unpinned_move_times_two,
        shapes(V),
        both(E1200),
        typed_only=True,
    ),
    Probe(
        "host_move_times_two",
        "no released compiler aborts on a two-operand starting instruction",
        host_move_times_two,
        shapes(V),
        both(COMPILED),
        typed_only=True,
    ),
    # unpinned_host parameters and outputs: S(6) on TPU
    Probe(
        "unpinned_argument_computed",
        "libtpu cannot compute on an unpinned_host argument (libtpu 0.0.17.1 lays it out in host memory: error 1200)",
        times_two,
        shapes(V),
        {"tpu": OTHER, "gpu": COMPILED},
        jit=lambda: {"in_shardings": unpinned()},
        unless=lambda g: {"tpu": E1200, "gpu": COMPILED} if g.tpu_unpinned_host_is_host_memory else None,
    ),
    Probe(
        "unpinned_argument_returned",
        "an unpinned_host argument passed through compiles",
        identity_pair,
        shapes(V, V),
        both(COMPILED),
        jit=lambda: {"in_shardings": (unpinned(), device())},
    ),
    Probe(
        "device_value_to_unpinned_output",
        "libtpu (up to jax 0.11's) has no copy from device into an unpinned_host output",
        times_two,
        shapes(V),
        {"tpu": OTHER, "gpu": COMPILED},
        jit=lambda: {"in_shardings": device(), "out_shardings": unpinned()},
        unless=lambda xla: None if xla.tpu_unpinned_output_from_device_fails else both(COMPILED),
    ),
    Probe(
        "host_argument_to_unpinned_output",
        "an unpinned_host output is not host memory: error 1200 (libtpu 0.0.17.1 lays it out in "
        "host memory: host compute)",
        times_two,
        shapes(V),
        both(E1200),
        jit=lambda: {"in_shardings": host(), "out_shardings": unpinned()},
        unless=lambda g: {"tpu": COMPILED, "gpu": E1200} if g.tpu_unpinned_host_is_host_memory else None,
    ),
    # slices of host values
    Probe(
        "slice_returned",
        "a slice of a host argument returned is a DMA",
        slice_returned,
        shapes(V),
        both(COMPILED),
        jit=lambda: {"in_shardings": host()},
    ),
    Probe(
        "slice_in_tuple",
        "the same inside a tuple of outputs (libtpu 0.0.17.1: error 1200, only a lone output is a DMA)",
        slice_in_tuple,
        shapes(V, V),
        both(COMPILED),
        jit=lambda: {"in_shardings": (host(), device())},
        unless=lambda g: None if g.slice_to_output_is_dma else both(E1200),
    ),
    Probe(
        "slice_then_multiply",
        "a slice computed on is host compute: error 1200",
        slice_then_multiply,
        shapes(V),
        both(E1200),
        jit=lambda: {"in_shardings": host()},
    ),
    Probe(
        "dynamic_slice_returned",
        "a dynamic slice returned is a DMA",
        dynamic_slice_returned,
        lambda: (*shapes(V)(), index_arg()),
        both(COMPILED),
        jit=lambda: {"in_shardings": (host(), device())},
    ),
    Probe(
        "reshape_returned",
        "a reshape is a bitcast: the host argument reaches the output",
        reshape_returned,
        shapes(V),
        both(E1200),
        jit=lambda: {"in_shardings": host()},
    ),
    Probe(
        "transpose_of_move",
        "TPU folds a transpose into a layout, XLA:GPU computes it on the host",
        transpose_of_move,
        shapes(V),
        both(COMPILED),
        typed_only=True,
    ),
    # scatters
    Probe(
        "constant_index_set",
        "a constant-index set becomes a DUS of the device argument",
        constant_index_set,
        shapes(V),
        both(OTHER),
        typed_only=True,
    ),
    Probe(
        "set_into_fresh_buffer",
        "a DUS into a fresh broadcast is allocated in host memory",
        set_into_fresh_buffer,
        shapes(V),
        both(COMPILED),
        typed_only=True,
    ),
    Probe(
        "dynamic_index_set",
        "XLA:GPU cannot build a dynamic-index scatter in host memory",
        dynamic_index_set,
        lambda: (*shapes(V)(), index_arg()),
        {"tpu": COMPILED, "gpu": OTHER},
        typed_only=True,
    ),
    Probe(
        "accumulate_at_index",
        "nor an accumulating one",
        accumulate_at_index,
        shapes(V),
        {"tpu": COMPILED, "gpu": OTHER},
        typed_only=True,
    ),
    Probe(
        "dynamic_index_set_alone",
        "the same set as the only output: XLA:GPU's verifier rejects a host-to-device update",
        dynamic_index_set_alone,
        lambda: (*shapes(V)(), index_arg()),
        {"tpu": COMPILED, "gpu": OTHER},
        jit=lambda: {"out_shardings": host()},
    ),
    Probe(
        "scatter_into_host_parameter",
        "a row set at a dynamic index of a host parameter compiles on XLA:GPU too",
        set_row,
        lambda: (*shapes(V)(), index_arg(), *shapes((128,))()),
        both(COMPILED),
        jit=lambda: {"in_shardings": (host(), None, device()), "out_shardings": host()},
    ),
    Probe(
        "scatter_in_scan_into_host_buffer",
        "rows added at dynamic indices of a host buffer in a loop body compile on XLA:GPU too",
        scatter_in_scan,
        lambda: (*shapes(V)(), *shapes((4,), dtype="int32")(), *shapes((4, 128))()),
        both(COMPILED),
        jit=lambda: {"out_shardings": host()},
    ),
    # host values used as indices: the index arithmetic is host compute, and it reaches what
    # the index selects
    Probe(
        "scatter_host_indices_into_moved_buffer",
        "a donated host buffer moved to device and scattered at host indices: libtpu builds the "
        "scatter its host indices make host compute as a fusion its host backend cannot configure",
        scatter_host_indices,
        lambda: (*shapes(V)(), *shapes((3,), dtype="int32")(), *shapes((3, 128))()),
        {"tpu": OTHER, "gpu": COMPILED},
        jit=lambda: {"in_shardings": (host(), host(), device()), "out_shardings": host(), "donate_argnums": 0},
        typed_only=True,
    ),
    Probe(
        "scatter_host_indices_to_device_output",
        "the same scatter returned as a device output: the host indices reach it (error 1200)",
        scatter_host_indices,
        lambda: (*shapes(V)(), *shapes((3,), dtype="int32")(), *shapes((3, 128))()),
        both(E1200),
        jit=lambda: {"in_shardings": (host(), host(), device())},
        typed_only=True,
        names=both("rows.1"),
    ),
    Probe(
        "host_index_comparison_to_device_output",
        "a comparison of host indices summed into a device output",
        host_index_count,
        lambda: (*shapes(V)(), *shapes((3,), dtype="int32")()),
        both(E1200),
        jit=lambda: {"in_shardings": (host(), host()), "out_shardings": (host(), None)},
        names=both("rows.1"),
        names_unless=lambda g: None if g.parameter_names_from_locations else both("Arg_1.2"),
    ),
    Probe(
        "clamped_host_index_slices_device_value",
        "a host index clamped on host slices a device value: the slice is the device's, it compiles",
        clamped_host_index_slice,
        lambda: (*shapes((8, 128))(), index_arg()),
        both(COMPILED),
        jit=lambda: {"in_shardings": (device(), host())},
    ),
    Probe(
        "clamped_host_index_updates_device_value",
        "a host index clamped on host places a device update: the index reaches the updated value",
        clamped_host_index_update,
        lambda: (*shapes(V)(), index_arg(), *shapes((1, 128))()),
        both(E1200),
        jit=lambda: {"in_shardings": (device(), host(), device())},
        names=both("i.1"),
        names_unless=lambda g: None if g.parameter_names_from_locations else both("Arg_1.2"),
    ),
    # loops
    Probe(
        "while_condition_on_host",
        "a loop condition computed from host memory aborts the compiler",
        while_condition_on_host,
        shapes((4, 128)),
        both(OTHER),
        typed_only=True,
    ),
    *_LOOP_CONDITION_PROBES,
    # host compute the backends cannot build
    Probe(
        "matmul_on_host",
        "XLA:GPU cannot build a dot in host memory",
        matmul,
        shapes(M, M),
        {"tpu": COMPILED, "gpu": OTHER},
        jit=lambda: {"in_shardings": (host(), device()), "out_shardings": host()},
    ),
    Probe(
        "scan_over_host_layers",
        "libtpu aborts on a dot in a loop mixing host and device memory",
        scan_layers,
        shapes(LAYERS, V),
        both(OTHER),
        jit=lambda: {"in_shardings": (host(), device()), "out_shardings": host()},
    ),
    Probe(
        "scan_over_host_layers_grad",
        "the same differentiated, the gradient returned to host: every compiler fails",
        _layers_grad(None),
        shapes(LAYERS, V),
        both(OTHER),
        jit=lambda: {"in_shardings": (host(), device()), "out_shardings": host()},
    ),
    Probe(
        "streamed_layers_grad",
        "each layer moved to device in the scan's body: the backward loop slices the device "
        "residuals through the function that slices the host stack, inlined per call",
        _layers_grad(device_move),
        shapes(LAYERS, V),
        both(COMPILED),
        jit=lambda: {"in_shardings": (host(), device())},
    ),
    Probe(
        "loop_over_host_weights",
        "the same with a loop-invariant host operand",
        loop_over_host_weights,
        shapes(M, V),
        both(OTHER),
        jit=lambda: {"in_shardings": (host(), device()), "out_shardings": host()},
    ),
    Probe(
        "loop_on_host_carry",
        "a dot of host values in a loop compiles on TPU",
        loop_on_host_carry,
        shapes(M),
        {"tpu": COMPILED, "gpu": OTHER},
        jit=lambda: {"in_shardings": host(), "out_shardings": host()},
    ),
    Probe(
        "elementwise_carry",
        "elementwise host compute in a loop compiles",
        elementwise_carry,
        shapes(M),
        both(COMPILED),
        jit=lambda: {"in_shardings": host(), "out_shardings": host()},
    ),
    Probe(
        "gather_on_host",
        "libtpu cannot build a gather in host memory (libtpu 0.0.17.1 can)",
        gather_rows,
        lambda: (*shapes(M)(), *shapes((4,), dtype="int32")()),
        {"tpu": OTHER, "gpu": COMPILED},
        jit=lambda: {"in_shardings": (host(), device()), "out_shardings": host()},
        unless=lambda g: both(COMPILED) if g.tpu_builds_host_gather else None,
    ),
    # copies of host slices to device (async slices on TPU)
    Probe(
        "slice_two_dimensions",
        "libtpu 0.0.42.1's async slice slices one dimension only",
        tile_of_stack,
        lambda: (*shapes(STACK)(), index_arg()),
        {"tpu": OTHER, "gpu": COMPILED},
        jit=lambda: {"in_shardings": (host(), None)},
        unless=lambda g: None if g.tpu_async_slice_one_dimension_only else both(COMPILED),
    ),
    Probe(
        "slice_one_dimension",
        "a slice of the leading dimension is copied to device on every compiler",
        row_of_stack,
        lambda: (*shapes(STACK)(), index_arg()),
        both(COMPILED),
        jit=lambda: {"in_shardings": (host(), None)},
    ),
    Probe(
        "slice_two_dimensions_in_nested_scans",
        "the same tile taken inside nested scans (issue 24's report)",
        tile_in_nested_scans,
        shapes(STACK, (64, 128)),
        {"tpu": OTHER, "gpu": COMPILED},
        jit=lambda: {"in_shardings": (host(), None)},
        unless=lambda g: None if g.tpu_async_slice_one_dimension_only else both(COMPILED),
    ),
    # updates from device into host buffers (async dynamic-update-slices on TPU)
    Probe(
        "update_two_dimensions",
        "libtpu 0.0.42.1's async update takes part of one dimension only (0.0.50.1: its 64 lanes)",
        *_update_of((16, 8, 128), (1, 8, 64), (1, 0, 1)),
        {"tpu": OTHER, "gpu": COMPILED},
        jit=lambda: {"out_shardings": host()},
    ),
    Probe(
        "update_whole_rows",
        "an update of whole rows of lanes is copied on every compiler",
        *_update_of((16, 128), (1, 128), (1, 0)),
        both(COMPILED),
        jit=lambda: {"out_shardings": host()},
    ),
    Probe(
        "lane_update",
        "part of the lanes written into a host buffer: libtpu 0.0.42.1 and 0.0.50.1 fail",
        *_update_of((16, 128), (16, 64), (0, 1)),
        {"tpu": OTHER, "gpu": COMPILED},
        jit=lambda: {"out_shardings": host()},
    ),
    Probe(
        "lane_update_in_scan",
        "half a lane row per step into a host buffer carried beside a scalar (issue 24's report)",
        lanes_in_scan,
        shapes((16, 128)),
        {"tpu": OTHER, "gpu": COMPILED},
        jit=lambda: {"out_shardings": (None, host())},
    ),
    Probe(
        "lane_update_of_whole_tiles",
        "128 of 256 lanes written into a host buffer compile on libtpu 0.0.50.1",
        *_update_of((16, 256), (16, 128), (0, 1)),
        {"tpu": OTHER, "gpu": COMPILED},
        jit=lambda: {"out_shardings": host()},
        unless=lambda g: None if g.tpu_async_update_lane_slice_fails else both(COMPILED),
    ),
    Probe(
        "lane_and_sublane_slice",
        "a copied tile of 8 sublanes and 64 lanes: libtpu 0.0.42.1 and 0.0.50.1 fail",
        _slice_of((4, 4, 8, 64), (0, 0, 1, 1)),
        lambda: (*shapes(STACK)(), index_arg()),
        {"tpu": OTHER, "gpu": COMPILED},
        jit=lambda: {"in_shardings": (host(), None)},
    ),
    Probe(
        "lane_slice_alone",
        "a copied slice of 64 lanes alone compiles on every compiler",
        _slice_of((4, 4, 64, 64), (0, 0, 0, 1)),
        lambda: (*shapes(STACK)(), index_arg()),
        both(COMPILED),
        jit=lambda: {"in_shardings": (host(), None)},
    ),
    Probe(
        "lane_and_leading_slice",
        "64 lanes of one leading row: libtpu 0.0.42.1's two dimensions; 0.0.50.1 copies it",
        _slice_of((1, 4, 64, 64), (1, 0, 0, 1)),
        lambda: (*shapes(STACK)(), index_arg()),
        {"tpu": OTHER, "gpu": COMPILED},
        jit=lambda: {"in_shardings": (host(), None)},
        unless=lambda g: None if g.tpu_async_slice_one_dimension_only else both(COMPILED),
    ),
    # updates along the dimension libtpu lays out in lanes (OFL1214)
    *(
        Probe(
            f"lane_layout_{name}",
            why,
            write_at(position),
            _buffer_update(buffer, update),
            {"tpu": outcome, "gpu": COMPILED},
            jit=lambda: {"in_shardings": (host(), None, None), "out_shardings": host(), "donate_argnums": 0},
        )
        for name, why, buffer, update, position, outcome in (
            ("kv_cache", "a KV cache of head dimension 64: positions in lanes", (8, 128, 64), (8, 1, 64), 1, OTHER),
            ("positions_first", "the same cache positions first: still in lanes", (128, 8, 64), (1, 8, 64), 0, OTHER),
            ("rows_of_96", "two rows of 96 into 256: the rows lie in lanes", (256, 96), (2, 96), 0, OTHER),
            ("rows_of_120", "a row of 120 into 128 rows: in lanes (less padding)", (128, 120), (1, 120), 0, OTHER),
            (
                "rows_of_120_in_136",
                "a row of 120 into 136 rows: lanes kept (less padding)",
                (136, 120),
                (1, 120),
                0,
                COMPILED,
            ),
            ("equal_padding", "64 rows of 64: the padding ties, lanes kept", (64, 64), (1, 64), 0, COMPILED),
            ("short_buffer", "16 rows of 64: lanes kept", (16, 64), (1, 64), 0, COMPILED),
            ("whole_lanes", "rows of 128 lanes: lanes kept", (256, 128), (2, 128), 0, COMPILED),
        )
    ),
    # host buffers stacked by an outer loop from an inner loop's host output (OFL1212)
    Probe(
        "nested_scan_remat_offload",
        "a remat offload policy on a scan nested in another, under grad (issue 24's report)",
        _nested_scan_remat_offload,
        shapes(M, (2, 3) + V),
        both(OTHER),
    ),
    Probe(
        "nested_stack_returned",
        "XLA:GPU cannot carry the stacked stacks; libtpu returns them",
        nested_stack_returned,
        shapes((2, 3) + V),
        {"tpu": COMPILED, "gpu": OTHER},
        jit=lambda: {"out_shardings": host()},
        typed_only=True,
    ),
    Probe(
        "nested_stack_rows_to_device",
        "libtpu copies rows of the stacked stacks straight to device",
        nested_stack_rows_to_device,
        shapes((2, 3) + V),
        {"tpu": COMPILED, "gpu": OTHER},
        typed_only=True,
    ),
    Probe(
        "nested_stack_read_on_host",
        "a slice of the stacked stacks kept in host memory: libtpu's async host call fails",
        nested_stack_read_on_host,
        shapes((2, 3) + V),
        both(OTHER),
        typed_only=True,
    ),
    # donated buffers returned in another memory (JAX aliases them: tf.aliasing_output)
    Probe(
        "donated_device_buffer_to_host_output",
        "a host output cannot reuse a donated device buffer (a KV cache updated in place)",
        write_block,
        lambda: (*shapes(CACHE, BLOCK)(), index_arg()),
        both(OTHER),
        jit=lambda: {"in_shardings": (device(), device(), None), "out_shardings": host(), "donate_argnums": 0},
    ),
    Probe(
        "donated_device_buffer_to_unpinned_output",
        "XLA:GPU's unpinned_host is host memory; libtpu up to jax 0.11's has no copy into it at all "
        "(libtpu 0.0.17.1's is host memory: donated_device_buffer_to_host_output's DMA from hbm to hbm)",
        write_block,
        lambda: (*shapes(CACHE, BLOCK)(), index_arg()),
        both(OTHER),
        jit=lambda: {"in_shardings": (device(), device(), None), "out_shardings": unpinned(), "donate_argnums": 0},
        unless=lambda g: (
            None
            if g.tpu_unpinned_output_from_device_fails or g.tpu_unpinned_host_is_host_memory
            else {"tpu": COMPILED, "gpu": OTHER}
        ),
    ),
    Probe(
        "donated_host_buffer_to_device_output",
        "libtpu cannot return a device output in a donated host buffer; XLA:GPU can",
        write_block,
        lambda: (*shapes(CACHE, BLOCK)(), index_arg()),
        {"tpu": OTHER, "gpu": COMPILED},
        jit=lambda: {"in_shardings": (host(), device(), None), "out_shardings": device(), "donate_argnums": 0},
    ),
    Probe(
        "donated_host_buffer_undeclared_output",
        "JAX declares the output that reuses a donated host buffer device memory (JAX 0.9.0 to "
        "0.12.0.1 alike): the update reaches it, error 1200",
        write_block,
        lambda: (*shapes(CACHE, BLOCK)(), index_arg()),
        both(E1200),
        jit=lambda: {"in_shardings": (host(), device(), None), "donate_argnums": 0},
    ),
    Probe(
        "donated_device_buffer_moved_to_host",
        "a device buffer donated and returned after a move to host: JAX aliases it to the host "
        "output, which reuses the device buffer (donated_device_buffer_to_host_output's failure)",
        write_block_then_offload,
        lambda: (*shapes(CACHE, BLOCK)(), index_arg()),
        both(OTHER),
        jit=lambda: {"in_shardings": (device(), device(), None), "donate_argnums": 0},
        typed_only=True,
    ),
    Probe(
        "donated_host_state_aliased_to_device_argument_output",
        "out_shardings leaves the first output's memory kind to JAX, which gives the donated host "
        "buffer to it (the same shape): libtpu cannot write the unchanged device argument into it",
        state_step_beside_passthrough,
        shapes((16, 128), (16, 128)),
        {"tpu": OTHER, "gpu": COMPILED},
        jit=lambda: {"in_shardings": (host(), device()), "out_shardings": (None, host()), "donate_argnums": 0},
        typed_only=True,
    ),
    Probe(
        "donated_host_state_aliased_to_computed_output",
        "as donated_host_state_aliased_to_device_argument_output with the output computed: both "
        "compile (and PjRt aborts the process on returning it: tests/chip/donation_record.json)",
        state_step_beside_computed,
        shapes((16, 128), (16, 128)),
        both(COMPILED),
        jit=lambda: {"in_shardings": (host(), device()), "out_shardings": (None, host()), "donate_argnums": 0},
        typed_only=True,
    ),
    Probe(
        "donated_host_buffer_to_host_output",
        "a host buffer donated to a host output is updated in place",
        write_block,
        lambda: (*shapes(CACHE, BLOCK)(), index_arg()),
        both(COMPILED),
        jit=lambda: {"in_shardings": (host(), device(), None), "out_shardings": host(), "donate_argnums": 0},
    ),
    # offloads that do nothing (OFL1211): the program compiles, nothing stays in host memory
    Probe(
        "moments_to_device_output",
        "moments moved to host, out_shardings device: JAX moves them back (0 host output bytes)",
        moments_step,
        shapes(M, M),
        both(COMPILED),
        jit=lambda: {"out_shardings": (device(), device())},
        typed_only=True,
        does_nothing=("tpu", "gpu"),
    ),
    Probe(
        "moments_to_host_output",
        "the same declared host memory on the way out: the moments stay on host",
        moments_step,
        shapes(M, M),
        both(COMPILED),
        jit=lambda: {"out_shardings": (host(), device())},
        typed_only=True,
    ),
    Probe(
        "scan_rows_to_device_output",
        "a scan's rows moved to host, its ys declared device: all moved back at the end",
        rows_to_host_in_scan,
        shapes((8,) + M),
        both(COMPILED),
        jit=lambda: {"out_shardings": (device(), device())},
        typed_only=True,
        does_nothing=("tpu", "gpu"),
    ),
    Probe(
        "scan_rows_to_host_output",
        "the same rows declared host memory: they stay on host",
        rows_to_host_in_scan,
        shapes((8,) + M),
        both(COMPILED),
        jit=lambda: {"out_shardings": (device(), host())},
        typed_only=True,
    ),
    Probe(
        "round_trip",
        "a move to host straight back to device: XLA:GPU removes it (libtpu copies there and back)",
        round_trip,
        shapes(M),
        both(COMPILED),
        typed_only=True,
        does_nothing=("gpu",),
    ),
    Probe(
        "round_trip_across_compute",
        "XLA:GPU removes the pair even with compute beside it",
        _offload_across_compute(barrier=False),
        shapes(M, M),
        both(COMPILED),
        typed_only=True,
        does_nothing=("gpu",),
    ),
    Probe(
        "round_trip_behind_barrier",
        "an optimization barrier between the moves keeps the offload on every compiler",
        _offload_across_compute(barrier=True),
        shapes(M, M),
        both(COMPILED),
        typed_only=True,
    ),
    Probe(
        "streamed_weights",
        "a host argument moved to device is streamed in: it lives on host between calls",
        streamed_weights,
        shapes(M, M),
        both(COMPILED),
        jit=lambda: {"in_shardings": (host(), device())},
    ),
    Probe(
        "remat_offload",
        "a remat policy offloading a named residual keeps it in host memory",
        _remat_grad(("act",)),
        shapes(M, M),
        both(COMPILED),
    ),
    Probe(
        "remat_offload_naming_nothing",
        "a policy whose names match no checkpoint_name moves nothing: no move for the analysis to see",
        _remat_grad(("activations",)),
        shapes(M, M),
        both(COMPILED),
    ),
    # meshes: XLA's SPMD partitioner renames what error 1200 names (param, param.N, mul.5)
    Probe(
        "mesh4_replicated_host_param",
        "a replicated host parameter updated and returned: the partitioner's first param",
        update,
        shapes(M, M),
        both(E1200),
        jit=lambda: {"in_shardings": (on_mesh(4, (), "pinned_host"), on_mesh(4))},
        devices=4,
        names=both("param"),
    ),
    Probe(
        "mesh8_sharded_host_param_donated",
        "a host parameter sharded over model and donated: still param",
        update,
        shapes(M, M),
        both(E1200),
        jit=lambda: {
            "in_shardings": (on_mesh(8, COLUMNS, "pinned_host"), on_mesh(8, COLUMNS)),
            "donate_argnums": 0,
        },
        devices=8,
        names=both("param"),
    ),
    Probe(
        "mesh4_shard_map_host_param",
        "a shard_map body's parameters are renamed first: the entry's host parameter is param.2 "
        "(param where XLA inlines the body first)",
        _shard_map_update(4),
        shapes(M, M),
        both(E1200),
        jit=lambda: {"in_shardings": (on_mesh(4, COLUMNS, "pinned_host"), on_mesh(4, COLUMNS))},
        devices=4,
        names=both("param.2"),
        names_unless=lambda g: both("param") if g.inlines_shard_map_body else None,
    ),
    Probe(
        "mesh4_shard_map_two_outputs",
        "a host parameter reaching both outputs of a shard_map: XLA's users in build order, output 0 first "
        "(libtpu 0.0.17.1, which inlines the body: output 1, a known difference)",
        _shard_map_two_outputs(4),
        shapes(M, M),
        both(E1200),
        jit=lambda: {"in_shardings": (on_mesh(4, COLUMNS, "pinned_host"), on_mesh(4, COLUMNS))},
        devices=4,
        names=both("param.2"),
        names_unless=lambda g: both("param") if g.inlines_shard_map_body else None,
        first_output=0,
        first_output_unless=lambda g: 1 if g.inlines_shard_map_body else None,
    ),
    Probe(
        "host_param_two_outputs",
        "a host parameter reaching two outputs: XLA's walk meets the first built user's output first",
        difference_and_sum,
        shapes(M, M),
        both(E1200),
        jit=lambda: {"in_shardings": (host(), device())},
        names=both("w.1"),
        names_unless=lambda g: None if g.parameter_names_from_locations else both("Arg_0.1"),
        first_output=0,
    ),
    Probe(
        "mesh8_host_param_after_loop",
        "a loop's body and condition take param and param.1: the second entry parameter is param.3",
        update_after_loop,
        shapes(M, M),
        both(E1200),
        jit=lambda: {"in_shardings": (on_mesh(8, COLUMNS), on_mesh(8, COLUMNS, "pinned_host"))},
        devices=8,
        names=both("param.3"),
    ),
    Probe(
        "mesh8_two_scans_train_step",
        "entry parameters are renamed in XLA's post order from the root (the first output's "
        "weight first), not in print order",
        two_scans_train_step,
        shapes((16, 1), (3, 16, 16), (32, 16), (32, 1)),
        both(E1200),
        jit=lambda: {
            "in_shardings": (on_mesh(8, (), "pinned_host"), on_mesh(8, (), "pinned_host"), on_mesh(8), on_mesh(8)),
            "out_shardings": (on_mesh(8, (), "pinned_host"), on_mesh(8, (), "pinned_host"), None),
            "donate_argnums": (0, 1),
        },
        devices=8,
        names=both("param.4"),
    ),
    Probe(
        "mesh4_unpinned_move_in_tuple",
        "the partitioner rebuilds the output tuple; libtpu has built one tuple of its own first",
        _to_unpinned_on_mesh(4, times_two=False),
        shapes(M),
        both(E1200),
        jit=lambda: {"in_shardings": (on_mesh(4, COLUMNS),)},
        typed_only=True,
        devices=4,
        names={"tpu": "tuple.3", "gpu": "tuple.2"},
    ),
    Probe(
        "mesh8_unpinned_move_times_two",
        "a multiply rebuilt by the partitioner takes the ids after the module's own and Shardy's",
        _to_unpinned_on_mesh(8, times_two=True),
        shapes(M),
        both(E1200),
        jit=lambda: {"in_shardings": (on_mesh(8, COLUMNS),)},
        typed_only=True,
        devices=8,
        names=both("mul.5"),
    ),
    Probe(
        "mesh8_host_params_streamed",
        "sharded host weights moved to device and used: a clean program on a mesh",
        _streamed_on_mesh(8),
        shapes(M, M),
        both(COMPILED),
        jit=lambda: {"in_shardings": (on_mesh(8, COLUMNS, "pinned_host"), on_mesh(8, COLUMNS))},
        devices=8,
    ),
    Probe(
        "mesh8_streamed_layers_sgd",
        "an SGD step over layers streamed slice by slice, the new stack returned to host: "
        "only the update is host compute",
        streamed_layers_sgd,
        shapes((3, 8, 8), (16, 8)),
        both(COMPILED),
        jit=lambda: {
            "in_shardings": (on_mesh(8, (), "pinned_host"), on_mesh(8)),
            "out_shardings": (on_mesh(8, (), "pinned_host"), None),
            "donate_argnums": 0,
        },
        typed_only=True,
        devices=8,
    ),
    Probe(
        "elementwise_on_host",
        "elementwise host compute compiles (and is warned of)",
        sine,
        shapes(M),
        both(COMPILED),
        jit=lambda: {"in_shardings": host(), "out_shardings": host()},
    ),
)


LANE_GATHERS: tuple[Probe, ...] = tuple(
    Probe(
        f"lane_gather_{name}",
        why,
        sgd_bias,
        shapes((size,), (size,)),
        {"tpu": outcome, "gpu": COMPILED},
        jit=lambda value=value, output=output: {
            "in_shardings": (on_mesh(8, value), on_mesh(8, value)),
            "out_shardings": on_mesh(8, output, "pinned_host"),
        },
        unless=None
        if outcome == COMPILED
        else lambda g: None if g.tpu_gathers_host_shards_by_updates else both(COMPILED),
        devices=8,
    )
    for name, why, size, value, output, outcome in (
        ("shards_of_64", "256 over 4 devices into a replicated host output", 256, ("model",), (), OTHER),
        ("shards_of_2", "8 over 4 devices into a replicated host output", 8, ("model",), (), OTHER),
        ("shards_of_64_over_8", "512 over 8 devices into 2 host shards", 512, (("data", "model"),), ("data",), OTHER),
        ("same_sharding", "256 over 4 devices into a host output sharded alike", 256, ("model",), ("model",), COMPILED),
    )
)
"""A 1-D host output gathered from the shards of its value (OFL1214), on an 8-device mesh.
Not in :data:`PROBES`: where they compile, libtpu and XLA:GPU gather the shards in host memory
and warn of the all-gather as host compute, which the analysis does not report; only the
outcome is held to the compilers (``tests/xla/test_lane_gathers.py``)."""


def expected(probe: Probe, target: str, generation: Any) -> str:
    """What the compilers of ``generation`` (a ``jax_compat.XlaGeneration``) do with ``probe``."""
    instead = probe.unless(generation) if probe.unless else None
    return (instead or probe.expect)[target]


def expected_name(probe: Probe, target: str, generation: Any) -> str | None:
    """The instruction ``generation``'s error 1200 starts from, where the probe records it."""
    instead = probe.names_unless(generation) if probe.names_unless else None
    names = instead or probe.names
    return names[target] if names else None


def expected_first_output(probe: Probe, generation: Any) -> int | None:
    """The output ``generation``'s error 1200 trace ends at, where the probe records it."""
    instead = probe.first_output_unless(generation) if probe.first_output_unless else None
    return probe.first_output if instead is None else instead


def differences(probe: Probe, target: str, generation: Any, report: Any) -> list[str]:
    """Where ``report`` (the analysis of the probe for ``target``) differs from what the
    compilers of ``generation`` were measured to do."""
    from offload_fixer.xla.agreement import outcome_class

    found = []
    predicted, outcome = report.predicted, expected(probe, target, generation)
    if outcome_class(predicted.outcome, predicted.code) != outcome:
        found.append(f"the analysis predicts {outcome_class(predicted.outcome, predicted.code)}, measured {outcome}")
    name = expected_name(probe, target, generation)
    if name is not None and predicted.instruction != name:
        found.append(f"error 1200 starts from {name}, the analysis says {predicted.instruction}")
    output = expected_first_output(probe, generation)
    if output is not None and predicted.output_index != output:
        found.append(f"the trace ends at output {output}, the analysis says {predicted.output_index}")
    return found


def skip_reason(probe: Probe, target: str | None = None) -> str | None:
    """Why the installed JAX cannot build ``probe`` (for ``target``, where one is given)."""
    import jax

    from offload_fixer import jax_compat

    if on_topology() and not _topology_devices()[0]:
        reason = (
            f"JAX {jax.__version__}'s CPU backend has no pinned_host memory for these programs, and "
            f"libtpu gives no compile-only {TOPOLOGY} devices to build them over ({_topology_devices()[1]})"
        )
        if "tpu" in os.environ.get(REQUIRE_COMPILERS, "").split(","):
            raise RuntimeError(f"this environment must have the TPU compiler: {reason}")
        return reason
    if target == "gpu" and jax_compat.xla_generation().compiler("gpu") is None:
        return (
            f"no CUDA compiler of JAX {jax.__version__}'s generation ({jax_compat.xla_generation().name}) is measured"
        )
    if probe.typed_only and jax_compat.regime() is not jax_compat.Regime.TYPED:
        return "the program relies on memory spaces in types (JAX >= 0.7.1)"
    if len(probe_devices()) < probe.devices:
        return f"the program needs {probe.devices} devices; set XLA_FLAGS={DEVICE_COUNT_FLAG}"
    return None


def lower(probe: Probe, platform: str) -> Any:
    import jax

    from offload_fixer import jax_compat

    return jax_compat.lower_for_platform(jax.jit(probe.fn, **probe.jit()), probe.args(), {}, platform)
