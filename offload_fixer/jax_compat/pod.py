"""A program's view of a TPU pod it does not run on: ``run --topology v5e-256``.

While :func:`pod_view` is open, JAX's device and process queries answer as process 0 of the
pod would: ``jax.devices()`` are the pod's compile-only devices (libtpu's, from
:func:`offload_fixer.jax_compat.topology_devices`), ``jax.local_devices()`` those of its
process 0, ``jax.process_count()`` the pod's hosts, ``jax.default_backend()`` ``"tpu"``, and
``jax.distributed.initialize()`` returns at once (there is no coordinator to reach: the
program is process 0). A mesh built from them (``jax.make_mesh``,
``mesh_utils.create_device_mesh``, ``Mesh(jax.devices(), ...)``) is the pod's mesh, and what the
program lowers for it is what it lowers on the pod.

Eager operations still run on the local CPU (its device is made JAX's default device), so a
program can make keys and abstract shapes. What needs the pod's chips (moving data onto
them, calling a jitted function or an executable whose shardings name them) cannot run on
compile-only devices: it raises :class:`PodExecution` where the program does it, after the
runner has checked the compilation.

Part of :mod:`offload_fixer.jax_compat`: the names replaced are ``jax._src.xla_bridge``'s
(JAX's own ``make_mesh`` and ``create_device_mesh`` call them there) and the public ones bound
to them, the same in JAX 0.4.35 - 0.12.0.1.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from offload_fixer.topology import Topology

QUERIES = (
    "devices",
    "device_count",
    "local_devices",
    "local_device_count",
    "process_index",
    "process_count",
    "process_indices",
)
"""``jax._src.xla_bridge``'s device and process queries, also public as ``jax.<name>``."""
MOVES = (
    "device_put",
    "make_array_from_callback",
    "make_array_from_single_device_arrays",
    "make_array_from_process_local_data",
)
"""Public functions that put data on devices: on the pod's, they cannot run here."""
COMPILE_ONLY_FAILURES = ("compile-only client", "Cannot copy array to non-addressable device")
"""Part of the error JAX gives for a transfer onto compile-only devices, so that whatever
reaches them despite :data:`MOVES` is still told apart: ``UNIMPLEMENTED:
MakeArraysFromHostBufferShards not available with compile-only client`` (jaxlib 0.10.2 and
0.12.0.1, libtpu 0.0.42.1 and 0.0.50.1), ``INVALID_ARGUMENT: Cannot copy array to
non-addressable device`` (jaxlib 0.6.2, libtpu 0.0.17.1)."""


class PodUnavailable(RuntimeError):
    """libtpu cannot build the pod's devices (not installed, or a layout it refuses)."""


class PodExecution(RuntimeError):
    """The program does something only the pod's chips can do (run a computation, hold data)."""


@dataclass
class Pod:
    """The compile-only devices a program sees, and what it asked of ``jax.distributed``."""

    devices: tuple[Any, ...]
    topology: Topology
    initialized: bool = False
    """The program called ``jax.distributed.initialize()``."""
    local: tuple[Any, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.local = tuple(d for d in self.devices if d.process_index == 0)

    @property
    def name(self) -> str:
        """How the user named the pod (``v5e-256``), for messages."""
        return str(self.topology)

    @property
    def processes(self) -> int:
        """Hosts of the pod: what ``jax.process_count()`` answers there."""
        return max((d.process_index for d in self.devices), default=0) + 1

    def holds(self, device: Any) -> bool:
        """Whether ``device`` is one of the pod's (compile-only) devices."""
        return getattr(device, "client", None) is self.devices[0].client

    def named_by(self, value: Any) -> bool:
        """Whether ``value`` (a device, a sharding, a pytree of them) places data on the pod."""
        import jax

        for leaf in jax.tree_util.tree_leaves(value):
            found = getattr(leaf, "device_set", None)
            candidates = found if found is not None else (leaf,)
            if any(self.holds(device) for device in candidates):
                return True
        return False

    def runs_on_pod(self, lowered: Any) -> bool:
        """Whether executing ``lowered`` (a ``jax.stages.Lowered``) needs the pod's devices:
        its argument or result shardings name them (``compile_args``, private, the same in
        JAX 0.4.35 - 0.12.0.1)."""
        try:
            compile_args = lowered._lowering.compile_args
        except AttributeError:
            return False
        shardings = [*compile_args.get("in_shardings", ()), *compile_args.get("out_shardings", ())]
        return any(self.named_by(s) for s in shardings if hasattr(s, "device_set"))

    def refusal(self, what: str) -> PodExecution:
        return PodExecution(
            f"{what} needs the {self.name} pod's chips, which a machine without them cannot run "
            "(its devices are compile-only)"
        )


def start(topology: Topology, verbose: bool = False) -> Pod:
    """The pod ``topology`` names, libtpu loaded for its devices without the lines it prints
    where there is no TPU (all of them with ``verbose``). libtpu is told not to look for a TPU
    host's metadata (``TPU_SKIP_MDS_QUERY``) and to share the machine with the oracle's
    compiler processes (``ALLOW_MULTIPLE_LIBTPU_LOAD``), unless the environment says otherwise."""
    import os

    from offload_fixer.jax_compat import topology_devices
    from offload_fixer.jax_compat.tracing import without_start_up_noise

    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    with without_start_up_noise(verbose):
        try:
            devices = topology_devices(topology)
        except Exception as exc:  # noqa: BLE001 - libtpu missing, or a layout it refuses: in its words
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            named = str(topology) if topology.name == topology.libtpu_name else f"{topology} ({topology.libtpu_name})"
            raise PodUnavailable(f"libtpu cannot build the devices of {named}: {reason}") from None
    return Pod(tuple(devices), topology)


def is_pod_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is JAX failing to use a compile-only device for more than compiling."""
    return isinstance(exc, PodExecution) or (
        type(exc).__name__ in ("JaxRuntimeError", "XlaRuntimeError")
        and any(text in str(exc) for text in COMPILE_ONLY_FAILURES)
    )


@contextmanager
def pod_view(pod: Pod) -> Iterator[Pod]:
    """Make JAX answer as process 0 of ``pod`` until the block ends (see the module)."""
    import jax
    import jax.distributed
    from jax._src import xla_bridge

    local_cpu = xla_bridge.get_backend("cpu").local_devices()[0]
    with ExitStack() as undo:
        for name in QUERIES:
            replacement = _answer(name, pod, getattr(xla_bridge, name))
            for module in (xla_bridge, jax):
                undo.enter_context(_replaced(module, name, replacement))
        undo.enter_context(_replaced(jax, "default_backend", lambda: "tpu"))
        for name in MOVES:
            undo.enter_context(_replaced(jax, name, _refusing_moves(pod, getattr(jax, name))))
        undo.enter_context(_replaced(jax.stages.Compiled, "__call__", _refusing_execution(pod)))
        undo.enter_context(_replaced(jax.distributed, "initialize", _initialize(pod)))
        undo.enter_context(_replaced(jax.distributed, "shutdown", lambda: None))
        undo.enter_context(_replaced(jax.distributed, "is_initialized", lambda: pod.initialized))
        previous_default = getattr(jax.config, "jax_default_device", None)
        jax.config.update("jax_default_device", previous_default or local_cpu)
        undo.callback(jax.config.update, "jax_default_device", previous_default)
        yield pod


@contextmanager
def _replaced(owner: Any, name: str, value: Any) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _answer(name: str, pod: Pod, original: Callable[..., Any]) -> Callable[..., Any]:
    """``jax.<name>`` as process 0 of the pod answers it; another backend (``"cpu"``) as before."""

    def on_pod(backend: Any) -> bool:
        return backend is None or backend == "tpu" or backend is pod.devices[0].client

    answers: dict[str, Callable[..., Any]] = {
        "devices": lambda: list(pod.devices),
        "device_count": lambda: len(pod.devices),
        "local_devices": lambda process_index=None: [d for d in pod.devices if d.process_index == (process_index or 0)],
        "local_device_count": lambda: len(pod.local),
        "process_index": lambda: 0,
        "process_count": lambda: pod.processes,
        "process_indices": lambda: list(range(pod.processes)),
    }
    answer = answers[name]

    @functools.wraps(original)
    def query(*args: Any, **kwargs: Any) -> Any:
        if name == "local_devices":
            process_index = args[0] if args else kwargs.get("process_index", kwargs.get("host_id"))
            backend = args[1] if len(args) > 1 else kwargs.get("backend")
            return answer(process_index) if on_pod(backend) else original(*args, **kwargs)
        backend = args[0] if args else kwargs.get("backend")
        return answer() if on_pod(backend) else original(*args, **kwargs)

    return query


def _refusing_moves(pod: Pod, move: Callable[..., Any]) -> Callable[..., Any]:
    """``move`` refused where it would put data on the pod's chips; inside a trace (a
    ``device_put`` in a jitted function) it is part of the program, never refused."""
    from offload_fixer.jax_compat.tracing import trace_state_check

    outside_any_trace = trace_state_check()

    @functools.wraps(move)
    def refusing(*args: Any, **kwargs: Any) -> Any:
        if outside_any_trace() and pod.named_by([*args, *kwargs.values()]):
            raise pod.refusal(f"jax.{move.__name__}")
        return move(*args, **kwargs)

    return refusing


def _refusing_execution(pod: Pod) -> Callable[..., Any]:
    from jax.stages import Compiled

    call = Compiled.__call__

    @functools.wraps(call)
    def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        if pod.named_by([self.input_shardings, self.output_shardings]):
            raise pod.refusal("executing a compiled program")
        return call(self, *args, **kwargs)

    return execute


def _initialize(pod: Pod) -> Callable[..., None]:
    def initialize(*args: Any, **kwargs: Any) -> None:
        """Process 0 of the pod has no coordinator to reach: nothing to do."""
        pod.initialized = True

    return initialize
