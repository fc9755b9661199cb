"""The one place that knows how JAX versions differ.

Three regimes decide how JAX assigns memory kinds to outputs (see ``docs/jax-versions.md``):

* ``LEGACY`` (<= 0.4.28): never inferred; a result is host only if ``out_shardings`` says so.
* ``PROPAGATION`` (0.4.29 - 0.7.0): a small propagation pass with rules for ``device_put``,
  ``scan`` and ``copy``; anything else loses the kind.
* ``TYPED`` (>= 0.7.1): memory space is part of the type; outputs follow types.

Modelled up to the 0.12 line (:data:`NEWEST_MODELLED`). Everything else in the package asks
this module instead of comparing versions itself, probing for a feature or importing JAX's
private modules (``jax._src``): it is one module on purpose, so that each difference between
JAX and jaxlib releases has one home, with the versions it covers.

Over 500 lines on purpose: each difference between JAX releases has its home here, the
version tables and the runtime shims that read them alike.
"""

from __future__ import annotations

import enum
import functools
import re
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jaxlib.mlir import ir

from offload_fixer import installed
from offload_fixer.model import DEVICE, HOST_KINDS, PINNED_HOST, TPU_HBM, UNPINNED_HOST

OLDEST_SUPPORTED = (0, 4, 35)
"""Oldest JAX the dynamic analysis runs under; static rules and spellings reach further back."""

NEWEST_MODELLED = "0.12.0.1"
"""Newest JAX whose behaviour the rules were checked against (its environment in
``scripts/test.sh``); its later patch releases share them. A newer minor release is refused
where a user names it; an installed newer JAX is checked with these rules."""


@dataclass(frozen=True)
class MemorySpaceApi:
    """One spelling of JAX's enum of memory spaces, and the first release that has it."""

    since: tuple[int, int, int]
    enum: str
    """The enum's qualified name: ``jax.memory.Space``."""
    host_member: str = "Host"
    device_member: str = "Device"

    @property
    def host(self) -> str:
        """``jax.memory.Space.Host``."""
        return f"{self.enum}.{self.host_member}"

    @property
    def device(self) -> str:
        """``jax.memory.Space.Device``."""
        return f"{self.enum}.{self.device_member}"


MEMORY_SPACE_APIS: tuple[MemorySpaceApi, ...] = (MemorySpaceApi((0, 7, 1), "jax.memory.Space"),)
"""Every spelling of JAX's memory-space enum, oldest first: the one table of it in the package.
A version's :attr:`Spelling.memory_space` is the newest entry it has; the static check's names,
the prefilter, the source locations and the codemods' readers know every entry, so a JAX
release that renames the enum or a member is one more entry here and nothing else
(``tests/test_jax_compat.py`` fakes one)."""


class UnsupportedJaxVersion(ValueError):
    """A JAX version string that cannot be parsed, or one outside what the tool models."""


class Regime(enum.Enum):
    LEGACY = "<=0.4.28"
    PROPAGATION = "0.4.29-0.7.0"
    TYPED = ">=0.7.1"


def parse_version(text: str) -> tuple[int, int, int]:
    """``"0.4.35"`` -> ``(0, 4, 35)``; tolerates suffixes such as ``.dev20250101`` or ``rc1``."""
    parts = text.strip().split(".")
    numbers: list[int] = []
    for part in parts[:3]:
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            raise UnsupportedJaxVersion(f"not a JAX version: {text!r}")
        numbers.append(int(digits))
    if len(numbers) < 2:
        raise UnsupportedJaxVersion(f"not a JAX version: {text!r}")
    while len(numbers) < 3:
        numbers.append(0)
    major, minor, patch = numbers
    if (major, minor) < (0, 4):
        raise UnsupportedJaxVersion(f"JAX {text} predates memory kinds (0.4.x); offload-fixer models 0.4.x and newer")
    return major, minor, patch


def check_modelled(text: str) -> tuple[int, int, int]:
    """A JAX version a user asks the rules of (``--jax-version``, ``jax-version``): parsed, and
    refused when it is newer than any release the rules model."""
    version = parse_version(text)
    newest = parse_version(NEWEST_MODELLED)
    if version[:2] > newest[:2]:
        raise UnsupportedJaxVersion(
            f"JAX {text} is newer than what offload-fixer models (the newest is {NEWEST_MODELLED}, "
            f"with its {newest[0]}.{newest[1]}.x patch releases)"
        )
    return version


@functools.cache
def installed_version() -> str:
    found = installed.version("jax")
    if found is None:  # pragma: no cover - jax is a dependency
        raise UnsupportedJaxVersion("JAX is not installed")
    return found


@functools.cache
def installed_jaxlib_version() -> str:
    """The installed jaxlib's version (package metadata: importing jaxlib is not needed)."""
    found = installed.version("jaxlib")
    if found is None:  # pragma: no cover - jaxlib is a dependency of jax
        raise UnsupportedJaxVersion("jaxlib is not installed")
    return found


def regime(version: str | None = None) -> Regime:
    return _regime_of(check_modelled(version) if version else parse_version(installed_version()))


def _regime_of(v: tuple[int, int, int]) -> Regime:
    if v <= (0, 4, 28):
        return Regime.LEGACY
    if v <= (0, 7, 0):
        return Regime.PROPAGATION
    return Regime.TYPED


class HostCompute(enum.Enum):
    """The two shapes of ``jax.experimental.compute_on.compute_on``."""

    CONTEXT = 'with compute_on("device_host"):'
    """A context manager (and decorator) taking the compute type: 0.4.29 - 0.11.0."""
    FUNCTION = 'compute_on(f, compute_type="device_host", out_memory_spaces=jax.memory.Space.Host)'
    """A function wrapper that also takes the outputs' memory spaces: 0.11.1 on (it was
    ``compute_on2`` from 0.10.1 to 0.11.0, beside the context manager)."""


@dataclass(frozen=True)
class Spelling:
    """How source code written for a JAX version moves to device and declares host outputs."""

    version: str
    regime: Regime
    device_kind: str
    """The memory kind name of device memory: ``"device"`` (``"tpu_hbm"`` before 0.4.25)."""
    host_kind: str
    """The memory kind name a host output is declared with."""
    memory_space: MemorySpaceApi | None
    """How ``jax.device_put(x, jax.memory.Space.Device)`` is spelled, if it exists (>= 0.7.1)."""
    transfer_to_memory_kind: bool
    """``jax._src.sharding_impls.TransferToMemoryKind`` exists (0.4.15 - 0.7.0)."""
    none_leaf_inherits_host: bool
    """An ``out_shardings`` leaf of ``None`` keeps a host memory kind (>= 0.4.29)."""
    host_compute: HostCompute | None
    """How ``jax.experimental.compute_on.compute_on`` runs code on the host CPU (none before 0.4.29)."""
    tree_map: str
    """The ``jax`` attribute path of ``tree_map``: ``tree.map`` (>= 0.4.25), else ``tree_util.tree_map``."""

    @property
    def memory_space_api(self) -> bool:
        """The version has JAX's memory-space enum (>= 0.7.1)."""
        return self.memory_space is not None


def spelling(version: str | None = None) -> Spelling:
    text = version or installed_version()
    v = check_modelled(text) if version else parse_version(text)
    old_names = v < (0, 4, 25)
    return Spelling(
        version=text,
        regime=_regime_of(v),
        device_kind=TPU_HBM if old_names else DEVICE,
        host_kind=UNPINNED_HOST if old_names else PINNED_HOST,
        memory_space=next((api for api in reversed(MEMORY_SPACE_APIS) if v >= api.since), None),
        transfer_to_memory_kind=(0, 4, 15) <= v <= (0, 7, 0),
        none_leaf_inherits_host=v >= (0, 4, 29),
        host_compute=None if v < (0, 4, 29) else HostCompute.CONTEXT if v < (0, 11, 1) else HostCompute.FUNCTION,
        tree_map="tree.map" if v >= (0, 4, 25) else "tree_util.tree_map",
    )


def describe_installed() -> str:
    """``"jax 0.10.2 (regime >=0.7.1: memory space is part of the type)"``."""
    meaning = {
        Regime.LEGACY: "output memory kinds never inferred",
        Regime.PROPAGATION: "output memory kinds propagated for device_put/scan/copy only",
        Regime.TYPED: "memory space is part of the type",
    }
    r = regime()
    return f"jax {installed_version()} (regime {r.value}: {meaning[r]})"


def check_runtime_supported() -> None:
    """Raise :class:`UnsupportedJaxVersion` when the installed JAX is too old to lower with."""
    v = parse_version(installed_version())
    if v < OLDEST_SUPPORTED:
        raise UnsupportedJaxVersion(
            f"jax {installed_version()} is older than 0.4.35, the oldest version offload-fixer "
            "can lower with; the static check (`offload-fixer check`) still works"
        )


# ---------------------------------------------------------------------------------------
# Lowering for an accelerator on whatever backend is present.
def lower_for_platform(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], platform: str) -> Any:
    """Lower ``fn`` (plain or ``jax.jit``-wrapped) for ``platform`` ("tpu" or "cuda").

    ``Traced.lower(lowering_platforms=...)`` is public since 0.4.3x and works on a CPU-only
    machine; it keeps the jit's ``in_shardings``/``out_shardings``/``donate_argnums``.
    """
    import jax

    check_runtime_supported()
    jitted = fn if hasattr(fn, "trace") else jax.jit(fn)
    traced = jitted.trace(*args, **kwargs)
    return traced.lower(lowering_platforms=(platform,))


def lowering_platform(target: str) -> str:
    """XLA's platform name for an analysis target: TPU layouts for ``tpu``, CUDA for GPUs."""
    return "tpu" if target == "tpu" else "cuda"


def host_memory_on_this_backend() -> bool:
    """Whether the local backend can hold ``pinned_host`` arrays (JAX's CPU build before
    0.5 offers only ``unpinned_host``, so user programs that build ``pinned_host``
    shardings fail there before anything is lowered)."""
    import jax

    try:
        kinds = {m.kind for m in jax.devices()[0].addressable_memories()}
    except Exception:  # noqa: BLE001  # pragma: no cover - very old backends
        return False
    return PINNED_HOST in kinds


def memory_move_target(memory_kind: str) -> Any:
    """What ``jax.device_put(x, target)`` takes inside ``jit`` to move ``x`` to ``memory_kind``.

    A single-device sharding with that memory kind when the local backend has such memory;
    otherwise ``TransferToMemoryKind`` (0.4.15 - 0.7.0), which still lowers the move for an
    accelerator (JAX's CPU build before 0.5 has only ``unpinned_host`` memory).
    """
    import jax

    device = jax.devices()[0]
    if memory_kind in {m.kind for m in device.addressable_memories()}:
        return jax.sharding.SingleDeviceSharding(device, memory_kind=memory_kind)
    if spelling().transfer_to_memory_kind:
        # JAX before 0.4.36 only; the installed JAX's typing may not have it
        from jax._src.sharding_impls import TransferToMemoryKind  # type: ignore[attr-defined]

        return TransferToMemoryKind(memory_kind)
    raise UnsupportedJaxVersion(
        f"jax {installed_version()} on {device.platform} has no {memory_kind!r} memory and no "
        "TransferToMemoryKind to move a value there inside jit"
    )


def compute_on_host(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run by the host CPU inside ``jit``, its results in host memory, spelled the way
    the installed JAX spells it (:class:`HostCompute`): the context manager used as a
    decorator up to 0.11.0, the function wrapper with ``out_memory_spaces`` from 0.11.1.
    Both lower to the same host call (``_xla_compute_type = "host"``) with host results."""
    import jax
    from jax.experimental.compute_on import compute_on

    form = spelling().host_compute
    if form is HostCompute.FUNCTION:
        # the function form is JAX 0.11.1's; the installed JAX's typing may be an older one's
        return compute_on(fn, compute_type="device_host", out_memory_spaces=jax.memory.Space.Host)  # type: ignore[call-arg, misc, arg-type, unused-ignore]
    if form is HostCompute.CONTEXT:
        return compute_on("device_host")(fn)
    raise UnsupportedJaxVersion(f"jax {installed_version()} has no compute_on")  # pragma: no cover


def shard_map_function() -> Callable[..., Any]:
    """``jax.shard_map`` (0.6.1+), or ``jax.experimental.shard_map.shard_map`` before it."""
    import jax

    if hasattr(jax, "shard_map"):
        return jax.shard_map
    from jax.experimental.shard_map import shard_map

    return shard_map


# ---------------------------------------------------------------------------------------
# Compile-only XLA clients: the released TPU and GPU compilers on a machine without the chip.
def compile_only_devices(platform: str, topology: str, target_config: str | None = None) -> list[Any]:
    """The compile-only devices of a TPU topology (``"v5e:2x2"``) or a CUDA one (``"1x1x1"``
    with a ``GpuTargetConfigProto`` in text form: without it the plugin looks for a GPU)."""
    from jax.experimental import topologies

    if platform == "tpu":
        return list(topologies.get_topology_desc(topology_name=topology, platform="tpu").devices)
    return list(topologies.get_topology_desc(platform="cuda", topology=topology, target_config=target_config).devices)


def parse_stablehlo(text: str) -> Any:
    """StableHLO text (with locations) as a module of JAX's own MLIR context."""
    from jaxlib.mlir import ir

    return ir.Module.parse(text, context=make_ir_context())


FIRST_JAXLIB_COMPILING_MLIR_MODULES = (0, 8, 0)
"""``Client.compile`` takes an MLIR module from jaxlib 0.8; before, serialized bytes or text."""


def compile_stablehlo(module: Any, devices: Sequence[Any], num_replicas: int, num_partitions: int) -> Any:
    """Run the full XLA pipeline of ``devices``' compiler over ``module`` (no execution).

    Compiles through the devices' own client, so a module lowered on the CPU for ``tpu`` or
    ``cuda`` is judged by exactly the compiler a user's accelerator job would run.
    """
    import numpy as np
    from jax._src import compiler
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import xla_client

    if parse_version(installed_jaxlib_version()) < FIRST_JAXLIB_COMPILING_MLIR_MODULES:
        module = jax_mlir.module_to_bytecode(module)  # bytecode keeps the locations
    client = devices[0].client
    assignment = np.array([d.id for d in devices[: num_replicas * num_partitions]]).reshape(
        num_replicas, num_partitions
    )
    options = compiler.get_compile_options(
        num_replicas=num_replicas,
        num_partitions=num_partitions,
        device_assignment=assignment,
    )
    chosen = xla_client.DeviceList(tuple(devices[: num_replicas * num_partitions]))
    return client.compile(module, executable_devices=chosen, compile_options=options)


def output_memory_kinds(executable: Any) -> list[str]:
    """Each flat output's memory kind in a compiled executable (one device's view)."""
    kinds = executable.get_output_memory_kinds()
    return list(kinds[0]) if kinds and isinstance(kinds[0], (list, tuple)) else list(kinds)


MEMORY_STAT_FIELDS = {
    "argument": "argument_size_in_bytes",
    "output": "output_size_in_bytes",
    "temp": "temp_size_in_bytes",
    "alias": "alias_size_in_bytes",
    "host_argument": "host_argument_size_in_bytes",
    "host_output": "host_output_size_in_bytes",
    "host_temp": "host_temp_size_in_bytes",
}
"""``model.MemoryFigures`` fields -> ``CompiledMemoryStats`` attributes (libtpu and the CUDA
plugin both give them deviceless)."""


def memory_figures(executable: Any) -> dict[str, int] | None:
    """A compiled executable's memory figures, or ``None`` where the compiler gives none."""
    stats_of = getattr(executable, "get_compiled_memory_stats", None)
    if stats_of is None:
        return None
    try:
        stats = stats_of()
    except Exception:  # noqa: BLE001 - a compiler that does not implement it raises its own error
        return None
    return {name: int(getattr(stats, attribute, 0) or 0) for name, attribute in MEMORY_STAT_FIELDS.items()}


@dataclass(frozen=True)
class XlaGeneration:
    """What one generation of released compilers does where generations differ (measured with
    ``scripts/fidelity.py`` on the compilers each JAX release installs: ``docs/xla-host-offloader.md``)."""

    name: str
    slice_to_output_is_dma: bool
    """A slice of a host value that reaches an output becomes a copy to device (not host compute)."""
    tpu_unpinned_output_from_device_fails: bool
    """libtpu cannot copy a device value into an ``unpinned_host`` output ('DMA from hbm to hbm')."""
    while_condition_on_host_aborts: bool
    """A loop condition computed from host memory fails a CHECK in the host offloader (the
    compiling process aborts); from jaxlib 0.12 XLA returns an error naming the condition's
    instruction instead. JAX 0.6.2 cannot build that program (its loop carries lose the memory
    kind), so its generation keeps the older behaviour unmeasured."""
    inlines_shard_map_body: bool
    """XLA's call inliner inlines a shard_map body called by name (``shmap_body``) before the
    host offloader runs (libtpu 0.0.17.1); later generations keep it as a call, so a move to
    host inside it is not the entry's root."""
    tpu_async_slice_one_dimension_only: bool = False
    """libtpu copies a slice of a host value to device as an async slice that may slice one
    dimension only ('Async slice only supports slicing in 1 dimension'; libtpu 0.0.42.1).
    libtpu 0.0.50.1 and the CUDA plugins compile such slices; libtpu 0.0.17.1 is not measured
    (JAX 0.6.2's CPU backend cannot build the programs), so it is not predicted there."""


XLA_GENERATIONS: tuple[tuple[tuple[int, int, int], XlaGeneration], ...] = (
    (
        (0, 7, 0),
        XlaGeneration(
            "libtpu 0.0.17.1 (jax 0.6.2)",
            slice_to_output_is_dma=False,
            tpu_unpinned_output_from_device_fails=True,
            while_condition_on_host_aborts=True,
            inlines_shard_map_body=True,
        ),
    ),
    (
        (0, 12, 0),
        XlaGeneration(
            "libtpu 0.0.42.1 / jax-cuda12-plugin 0.10.2 (jax 0.10.2)",
            slice_to_output_is_dma=True,
            tpu_unpinned_output_from_device_fails=True,
            while_condition_on_host_aborts=True,
            inlines_shard_map_body=False,
            tpu_async_slice_one_dimension_only=True,
        ),
    ),
    (
        (99, 0, 0),
        XlaGeneration(
            "libtpu 0.0.50.1 / jax-cuda12-plugin 0.12.0.1 (jax 0.12.0.1)",
            slice_to_output_is_dma=True,
            tpu_unpinned_output_from_device_fails=False,
            while_condition_on_host_aborts=False,
            inlines_shard_map_body=False,
        ),
    ),
)
"""Generations by the jaxlib release they ship with (the first jaxlib *not* in each): ``jax[tpu]``
pins the libtpu of its release and the CUDA plugin is versioned with jaxlib, so the installed
jaxlib tells which compilers a program will meet."""


def xla_generation(jaxlib_version: str | None = None) -> XlaGeneration:
    """The released compilers that pair with ``jaxlib_version`` (default: the installed jaxlib)."""
    v = parse_version(jaxlib_version or installed_jaxlib_version())
    return next(generation for before, generation in XLA_GENERATIONS if v < before)


FIRST_JAX_WITH_PYPI_LIBTPU = (0, 5, 0)
"""``jax[tpu]`` before 0.5 pins a ``libtpu-nightly`` that the registry no longer serves."""


def compiler_requirements(target: str, version: str | None = None) -> list[str] | None:
    """What to ``pip install`` beside JAX ``version`` for the released compiler of ``target``
    (compile-only: no accelerator, no driver); ``None`` where the registry has none."""
    text = version or installed_version()
    v = parse_version(text)
    if target == "tpu":
        return [f"jax[tpu]=={text}"] if v >= FIRST_JAX_WITH_PYPI_LIBTPU else None
    return [f"jax-cuda12-plugin=={text}", f"jax-cuda12-pjrt=={text}"]


@dataclass(frozen=True)
class HloInstruction:
    computation: str
    name: str
    opcode: str
    text: str
    """The instruction as HLO text prints it (attributes included)."""
    entry: bool
    root: bool


def hlo_instructions(text: str) -> list[HloInstruction]:
    """Every instruction of the HLO translation of StableHLO ``text``, computation by
    computation in print order. Read from the printed HLO, which every jaxlib has (the
    ``HloModule.computations()`` API appeared only in jaxlib 0.7)."""
    import re

    module = stablehlo_to_hlo(text)
    header = re.compile(r"^(ENTRY )?%?([\w.\-]+) \(")
    line_re = re.compile(r"^\s+(ROOT )?%?([\w.\-]+) = (?:\([^=]*?\)|\S+) ([\w\-]+)\(")
    out: list[HloInstruction] = []
    computation, entry = "", False
    for line in module.to_string().splitlines():
        found = header.match(line)
        if found:
            computation, entry = found.group(2), bool(found.group(1))
            continue
        found = line_re.match(line)
        if found:
            out.append(
                HloInstruction(computation, found.group(2), found.group(3), line.strip(), entry, bool(found.group(1)))
            )
    return out


def stablehlo_to_hlo(text: str) -> Any:
    """jaxlib's own MLIR -> HLO translation of a module (the first step of every XLA
    compile), as an ``HloModule`` whose instructions carry the names XLA's messages print.
    ``xla_client._xla.mlir.mlir_module_to_xla_computation``, private in 0.4.35 - 0.12.0.1."""
    computation = _mlir_bindings().mlir_module_to_xla_computation(text, use_tuple_args=False, return_tuple=False)
    return computation.get_hlo_module()


# ---------------------------------------------------------------------------------------
# jaxlib's MLIR and HLO bindings: what each jaxlib exposes, measured in the CI's environments
# (jaxlib 0.4.35, 0.6.2, 0.10.2, 0.12.0.1).
def make_ir_context() -> ir.Context:
    """An MLIR context with every dialect JAX emits (StableHLO, CHLO, SDY, func...) registered:
    ``jax._src.interpreters.mlir.make_ir_context``, private in 0.4.35 - 0.12.0.1."""
    from jax._src.interpreters import mlir as jax_mlir

    return jax_mlir.make_ir_context()


@functools.cache
def typed_locations() -> bool:
    """Whether jaxlib's MLIR bindings have typed location classes (``NameLoc``, ``CallSiteLoc``,
    ``FileLineColLoc``, ``FusedLoc``): jaxlib 0.10.2 and 0.12.0.1 do; 0.4.35 and 0.6.2 only
    print a location."""
    from jaxlib.mlir import ir

    return all(hasattr(ir, name) for name in ("NameLoc", "CallSiteLoc", "FileLineColLoc", "FusedLoc"))


def value_location(value: Any) -> Any:
    """The location of an MLIR value (an operation's result or a block argument), or None
    where the bindings do not give one: ``Value.location`` exists from jaxlib 0.6.2 (not 0.4.35)."""
    return value.location if hasattr(value, "location") else None


def hlo_bindings() -> Any:
    """jaxlib's HLO classes (``HloModule``, ``HloPrintOptions``, ``XlaComputation``,
    ``hlo_module_from_text``): ``jax._src.lib.hlo`` (``jaxlib._hlo``) in jaxlib 0.10.2 and
    0.12.0.1, ``xla_client._xla`` (``xla_extension``) in 0.4.35 and 0.6.2."""
    try:
        from jax._src.lib import hlo

        return hlo
    except ImportError:
        from jax._src.lib import xla_client

        return xla_client._xla


def _mlir_bindings() -> Any:
    """jaxlib's MLIR <-> XLA conversions: ``xla_client._xla.mlir`` in 0.4.35 - 0.12.0.1."""
    from jax._src.lib import xla_client

    return xla_client._xla.mlir


def hlo_to_stablehlo(hlo_module: Any) -> str | bytes:
    """XLA's own conversion of an ``HloModule`` to StableHLO (text or bytecode, for
    ``ir.Module.parse``): ``mlir.hlo_to_stablehlo`` from jaxlib 0.6.2, through an
    ``XlaComputation`` in 0.4.35."""
    proto = hlo_module.as_serialized_hlo_module_proto()
    bindings = _mlir_bindings()
    if hasattr(bindings, "hlo_to_stablehlo"):
        return bindings.hlo_to_stablehlo(proto)
    return bindings.xla_computation_to_mlir_module(hlo_bindings().XlaComputation(proto))


def hlo_instructions_of(computation: Any) -> list[Any] | None:
    """The instructions of an ``HloComputation``, or None where the bindings do not list
    them: ``HloComputation.instructions`` exists in jaxlib 0.10.2 and 0.12.0.1, not in 0.4.35
    or 0.6.2."""
    return list(computation.instructions()) if hasattr(computation, "instructions") else None


# ---------------------------------------------------------------------------------------
# JAX's tracing machinery, as the runner observes it.
def trace_state_check() -> Callable[[], bool]:
    """A test of whether no JAX transformation is tracing at the moment of the call:
    ``jax._src.core.trace_state_clean``, private in 0.4.35 - 0.12.0.1 (the public
    ``jax.core.trace_state_clean`` is deprecated in 0.6.2 and gone by 0.10.2)."""
    from jax._src.core import trace_state_clean

    return trace_state_clean


def tracer_class() -> type:
    """JAX's ``Tracer`` class (what a traced value is): ``jax.core.Tracer``, public in 0.4.35 -
    0.12.0.1, where much else of ``jax.core`` is deprecated name by name."""
    import jax.core

    return jax.core.Tracer


# Compilations JAX makes for itself: eager operations.
InternalCompilation = Callable[[Any, Sequence[Any], Sequence[Any], Callable[[str], Any]], None]
"""``(fun, flat arguments, flat results, lower)``; ``lower(platform)`` gives a ``Lowered``."""


@contextmanager
def observe_compilations(observer: InternalCompilation) -> Iterator[bool]:
    """Call ``observer`` after every jit call that misses JAX's C++ dispatch cache (the first
    call of a signature), JAX's own jits included: an eager ``x * 2`` or ``x.reshape(-1)``
    runs ``jnp.multiply``'s jit or a jit of the primitive (``dispatch.apply_primitive``),
    compiled like any other. Yields False where this JAX's dispatch is not one this module
    knows (nothing is observed then).

    The hook is the Python function each cache miss calls: ``pjit._run_python_pjit`` in recent
    JAX (0.10, 0.12: it receives the inferred parameters, from which ``stages.Traced`` is
    rebuilt as ``jit(...).trace`` does), ``pjit._python_pjit_helper`` before (0.4.35, 0.6.2:
    re-traced through ``jit_trace`` or ``_make_jit_wrapper``).
    """
    import inspect

    from jax._src import pjit

    reentered = threading.local()

    def notify(fun: Any, args_flat: Sequence[Any], out_flat: Sequence[Any], lower: Callable[[str], Any]) -> None:
        if getattr(reentered, "active", False):
            return  # a compilation the observer itself caused (lowering for the target)
        reentered.active = True
        try:
            observer(fun, args_flat, out_flat, lower)
        finally:
            reentered.active = False

    modern = getattr(pjit, "_run_python_pjit", None)
    legacy = getattr(pjit, "_python_pjit_helper", None)
    replacement: Callable[..., Any]
    if modern is not None and list(inspect.signature(modern).parameters)[:3] == ["p", "args_flat", "fun"]:
        from jax._src import api_util, stages

        # JAX 0.12 also takes the function's source description (for its error messages).
        wants_source = "fun_sourceinfo" in inspect.signature(stages.Traced.__init__).parameters

        def run_python_pjit(p, args_flat, fun, args, kwargs):
            result = modern(p, args_flat, fun, args, kwargs)

            def lower(platform: str) -> Any:
                arg_types = [pjit.convert_to_metaty(a) for a in args_flat]
                source = (api_util.fun_sourceinfo(fun),) if wants_source else ()
                traced = stages.Traced(arg_types, p.params, p.in_tree, p.out_tree, p.consts, *source)
                return traced.lower(lowering_platforms=(platform,))

            notify(fun, args_flat, result[1], lower)
            return result

        name, replacement, original = "_run_python_pjit", run_python_pjit, modern
    elif legacy is not None and list(inspect.signature(legacy).parameters)[:2] == ["fun", "jit_info"]:

        def python_pjit_helper(fun, jit_info, *args, **kwargs):
            result = legacy(fun, jit_info, *args, **kwargs)

            def lower(platform: str) -> Any:
                if hasattr(pjit, "jit_trace"):  # 0.5 - 0.6: takes what a jitted function holds
                    wrapper = types.SimpleNamespace(_fun=fun, _jit_info=jit_info)
                    traced = pjit.jit_trace(wrapper, *args, **kwargs)
                else:
                    # JAX 0.4.x only; the installed JAX's typing may not have it
                    traced = pjit._make_jit_wrapper(fun, jit_info).trace(*args, **kwargs)  # type: ignore[attr-defined, unused-ignore]
                return traced.lower(lowering_platforms=(platform,))

            notify(fun, result[3], result[1], lower)
            return result

        name, replacement, original = "_python_pjit_helper", python_pjit_helper, legacy
    else:
        yield False
        return
    setattr(pjit, name, replacement)
    try:
        yield True
    finally:
        setattr(pjit, name, original)


def host_memory_kind(value: Any) -> str | None:
    """The memory kind of a committed array in host memory, other than its device's default
    (JAX's CPU build before 0.5 keeps every array in ``unpinned_host``: that is not offloading)."""
    sharding = getattr(value, "sharding", None)
    kind = getattr(sharding, "memory_kind", None)
    if sharding is None or kind not in HOST_KINDS or not getattr(value, "committed", True):
        return None
    try:
        default = next(iter(sharding.device_set)).default_memory().kind
    except Exception:  # noqa: BLE001 - a sharding without devices to ask: keep the kind
        return kind
    return None if kind == default else kind


# ---------------------------------------------------------------------------------------
# Starting JAX under `run` on a machine without an accelerator
ACCELERATOR_START_UP_NOISE = (
    # the CUDA plugin (jax-cuda12-plugin 0.6 - 0.12), once per library it loads, without a GPU
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"I\d{4} [\d:.]+ +\d+ cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine, GPU will not be used\.",
    # libtpu (0.0.17.1 - 0.0.50.1) starting where there is no TPU to find
    r"Failed to find host bounds for accelerator type: WARNING: could not determine TPU accelerator type.*",
    r"WARNING: Logging before InitGoogle\(\) is written to STDERR",
    r"E\d{4} [\d:.]+ +\d+ common_lib\.cc:\d+\] INVALID_ARGUMENT: Error: unexpected worker hostname .*",
    r"=== Source Location Trace: === ?",
    r"learning/[\w/]+\.cc:\d+",
)
"""What the released compilers' plugins write to stderr while JAX starts on a machine without
their hardware: a line each, in this order, measured with libtpu 0.0.17.1, 0.0.42.1, 0.0.50.1
and jax-cuda12-plugin 0.10.2, 0.12.0.1. None of it is about the user's program."""
_PLUGIN_FAILURE = "Jax plugin configuration error:"
_TRACEBACK_LINE = re.compile(r"\s|Traceback |The above exception|During handling|[\w.]+(Error|Exception)\b.*: |$")
"""A line of the traceback that follows :data:`_PLUGIN_FAILURE`."""
"""JAX's log line (``xla_bridge.discover_pjrt_plugins``) when a plugin fails to initialise;
its traceback follows. Without a GPU the CUDA plugin fails so every time ("Unable to load
CUDA"): only there is it noise."""


def accelerator_visible() -> bool:
    """Whether JAX could find a TPU or a GPU here, asked as JAX asks before it starts a backend
    (``jax._src.hardware_utils``, 0.4.35 - 0.12: TPU chips on the PCI bus, NVIDIA device
    nodes; AMD's ``/dev/kfd``). Cheap: no plugin is loaded."""
    import os

    from jax._src import hardware_utils

    return (
        hardware_utils.num_available_tpu_chips_and_device_id()[0] > 0
        or hardware_utils.has_visible_nvidia_gpu()
        or os.path.exists("/dev/kfd")
    )


def start_quietly(verbose: bool = False) -> None:
    """Import JAX and register its plugins before ``run`` starts the user's program (or the
    kernel extension its cells), so that what the plugins print where their hardware is
    missing never reaches the user; and where JAX has no accelerator to find, start only its
    CPU backend (``jax_platforms="cpu"``) instead of probing for a TPU for seconds.
    ``JAX_PLATFORMS`` (or ``JAX_PLATFORM_NAME``, or ``jax_platforms`` set in code) chosen by
    the user always wins: then JAX starts what it names, and only its start-up noise is left
    out. ``verbose`` shows everything the plugins printed."""
    import os
    import sys

    with _stderr_without_start_up_noise(verbose) as state:
        import jax
        from jax._src import xla_bridge

        state.plugins_fail_as_noise = not accelerator_visible()
        user_chose = {"JAX_PLATFORMS", "JAX_PLATFORM_NAME"} & set(os.environ) or getattr(
            jax.config, "jax_platforms", None
        )
        if state.plugins_fail_as_noise and not user_chose and not xla_bridge.backends_are_initialized():
            jax.config.update("jax_platforms", "cpu")
        # loads each plugin once (the CUDA plugin logs as it loads); a backend starts later, on
        # the program's first operation, and may start libtpu (the user asked for it)
        xla_bridge._discover_and_register_pjrt_plugins()
    start_backends = xla_bridge.backends
    if getattr(start_backends, "started_quietly", False):
        return  # a kernel that loads the extension again

    @functools.wraps(start_backends)
    def backends_quietly() -> Any:
        if xla_bridge.backends_are_initialized():
            return start_backends()
        sys.stderr.flush()
        with _stderr_without_start_up_noise(verbose) as state_now:
            state_now.plugins_fail_as_noise = state.plugins_fail_as_noise
            return start_backends()

    backends_quietly.started_quietly = True  # type: ignore[attr-defined]
    xla_bridge.backends = backends_quietly  # JAX's own calls look the name up in its module


@dataclass
class _StartUp:
    plugins_fail_as_noise: bool = False


@contextmanager
def _stderr_without_start_up_noise(verbose: bool) -> Iterator[_StartUp]:
    """Capture file descriptor 2 (C++ logs bypass ``sys.stderr``) while JAX starts, then write
    back what is not :data:`ACCELERATOR_START_UP_NOISE`."""
    import os
    import sys
    import tempfile

    state = _StartUp()
    if verbose:
        yield state
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield state
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode("utf-8", errors="replace")
            noise = re.compile("|".join(ACCELERATOR_START_UP_NOISE))
            kept: list[str] = []
            in_traceback = False
            for line in text.splitlines(keepends=True):
                if in_traceback and _TRACEBACK_LINE.match(line):
                    continue
                in_traceback = state.plugins_fail_as_noise and line.startswith(_PLUGIN_FAILURE)
                if not in_traceback and not noise.fullmatch(line.rstrip("\r\n")):
                    kept.append(line)
            if kept:
                os.write(2, "".join(kept).encode())
