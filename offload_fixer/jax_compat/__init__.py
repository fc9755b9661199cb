"""The one place that knows how JAX versions differ.

Three regimes decide how JAX assigns memory kinds to outputs (see ``docs/jax-versions.md``):

* ``LEGACY`` (<= 0.4.28): never inferred; a result is host only if ``out_shardings`` says so.
* ``PROPAGATION`` (0.4.29 - 0.7.0): a small propagation pass with rules for ``device_put``,
  ``scan`` and ``copy``; anything else loses the kind.
* ``TYPED`` (>= 0.7.1): memory space is part of the type; outputs follow types.

Modelled up to the 0.12 line (:data:`NEWEST_MODELLED`). Everything else in the package asks
this package instead of comparing versions itself, probing for a feature or importing JAX's
private modules (``jax._src``), so that each difference between JAX and jaxlib releases has
one home, with the versions it covers. This module holds the version facts (the tables, the
spellings, the compiler generations) and the lowering and compile-only shims;
:mod:`.generations` what each generation of released compilers does where they differ;
:mod:`.mlir` jaxlib's MLIR and HLO bindings; :mod:`.tracing` JAX's tracing machinery and its
start-up under ``run``; :mod:`.stages` a lowered program compiled from another module (``run``
on an accelerator, a failing compilation compiled without its offload); :mod:`.pod` a
program's view of a TPU pod it does not run on; :mod:`.distributed` the coordinator of a
``jax.distributed`` program.

Over 500 lines on purpose: the version facts (:class:`Spelling` and the tables it reads) and
the shims that apply them to lowering and compiling share one home, so a release is one edit.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from offload_fixer import installed
from offload_fixer.jax_compat.generations import XLA_GENERATIONS, XlaGeneration
from offload_fixer.jax_compat.mlir import make_ir_context
from offload_fixer.model import DEVICE, PINNED_HOST, TPU_HBM, UNPINNED_HOST, RematPolicy
from offload_fixer.topology import Topology

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
    make_mesh_axis_type: str
    """The axis type ``jax.make_mesh`` gives each axis its call names none of: ``Explicit`` from
    0.9.0 (0.8.1 - 0.8.3 warn that it will change), ``Auto`` before."""
    explicit_mesh_keeps_unpinned_on_device: bool
    """A value moved to ``unpinned_host`` by a ``NamedSharding`` over ``Explicit`` axes is typed
    with that mesh and device memory (only ``pinned_host`` is JAX's host space), so JAX returns it
    through a move back to device, which libtpu compiles (>= 0.7.2; docs/jax-versions.md)."""

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
        make_mesh_axis_type="Explicit" if v >= (0, 9, 0) else "Auto",
        explicit_mesh_keeps_unpinned_on_device=v >= (0, 7, 2),
    )


_MIXED_MEMORY_SPACES = re.compile(r"memory_space of all inputs passed to `(\w+)` must be the same")
"""JAX's refusal of an operation on operands in different memory spaces, worded alike from
0.7.1 to 0.12.0.1: ``memory_space of all inputs passed to `dot_general` must be the same. Got
one operand with type: float32[16,8] and another operand with type: float32<host>[8,4]``."""


def mixed_memory_space_refusal(error: BaseException) -> str | None:
    """The primitive JAX refused to trace because its operands live in host and device memory
    (``dot_general``), where ``error`` is that refusal (a ``ValueError`` while tracing; JAX
    refuses from 0.7.1, :attr:`Regime.TYPED`, on a value moved to ``pinned_host`` inside ``jit``
    or a committed ``pinned_host`` array passed in: a ``NamedSharding`` one from 0.7.1, a
    single-device one from 0.7.2; an argument streamed through a host ``in_shardings`` is typed
    device memory and is not refused)."""
    if not isinstance(error, ValueError):
        return None
    match = _MIXED_MEMORY_SPACES.search(str(error))
    return match.group(1) if match else None


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


def lower_with_policies(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], platform: str, lowered: Any = None
) -> tuple[Any, tuple[RematPolicy, ...]]:
    """:func:`lower_for_platform`, and the remat offload policies the traced program applies
    (:func:`offload_fixer.jax_compat.policies.remat_policies`): what the lowered module alone
    cannot show, a policy that offloads nothing leaving no move in it. ``lowered``: the
    program's own lowering for ``platform``, kept (JAX's trace is cached: only the policies
    are read)."""
    import jax

    from offload_fixer.jax_compat.policies import remat_policies

    check_runtime_supported()
    jitted = fn if hasattr(fn, "trace") else jax.jit(fn)
    traced = jitted.trace(*args, **kwargs)
    return lowered or traced.lower(lowering_platforms=(platform,)), remat_policies(traced)


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
        # the context manager is JAX 0.4.29 - 0.11.0's; the installed JAX's typing may be a newer one's
        return compute_on("device_host")(fn)  # type: ignore[call-arg, unused-ignore]
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
def compile_only_devices(
    platform: str,
    topology: str,
    target_config: str | None = None,
    *,
    num_slices: int = 1,
    chip_config: str | None = None,
) -> list[Any]:
    """The compile-only devices of a TPU topology (``"v5e:2x2"``) or a CUDA one (``"1x1x1"``
    with a ``GpuTargetConfigProto`` in text form: without it the plugin looks for a GPU).

    A TPU topology may have several slices (``num_slices``: each device then has its
    ``slice_index``) and a ``chip_config`` (``"megacore"``: a device per v4 or v5p chip, not
    per TensorCore). libtpu 0.0.17.1, 0.0.42.1 and 0.0.50.1 take both, through
    ``get_topology_desc``'s keywords (the same in JAX 0.4.35 - 0.12)."""
    from jax.experimental import topologies

    if platform == "tpu":
        options: dict[str, Any] = {"num_slices": num_slices} if num_slices != 1 else {}
        if chip_config is not None:
            options["chip_config_name"] = chip_config
        return list(topologies.get_topology_desc(topology_name=topology, platform="tpu", **options).devices)
    return list(topologies.get_topology_desc(platform="cuda", topology=topology, target_config=target_config).devices)


def topology_devices(topology: Topology) -> list[Any]:
    """The compile-only devices of a TPU pod (:mod:`offload_fixer.topology`), in libtpu's
    order; raises what libtpu raises for a layout it refuses (``v5e:1x1``)."""
    return compile_only_devices(
        "tpu", topology.libtpu_name, num_slices=topology.num_slices, chip_config=topology.generation.chip_config
    )


def mesh_axis_types(mesh: Any) -> list[str] | None:
    """The names of a mesh's axis types (``Auto``, ``Explicit``, ``Manual``: JAX 0.6.2 on;
    ``jax.make_mesh``'s default: :attr:`Spelling.make_mesh_axis_type`);
    ``None`` where the JAX has none (0.4.35)."""
    types = getattr(mesh, "axis_types", None)
    return None if types is None else [kind.name for kind in types]


def mesh_of(devices: Any, names: Sequence[str], axis_types: Sequence[str] | None) -> Any:
    """``jax.sharding.Mesh`` over ``devices`` (an array of the axes' shape), with the named
    axis types where this JAX has them."""
    import jax

    axis_type = getattr(jax.sharding, "AxisType", None)
    if axis_types is None or axis_type is None:
        return jax.sharding.Mesh(devices, tuple(names))
    return jax.sharding.Mesh(devices, tuple(names), axis_types=tuple(axis_type[kind] for kind in axis_types))


def parse_stablehlo(text: str) -> Any:
    """StableHLO text (with locations) as a module of JAX's own MLIR context."""
    from jaxlib.mlir import ir

    return ir.Module.parse(text, context=make_ir_context())


FIRST_JAXLIB_COMPILING_MLIR_MODULES = (0, 8, 0)
"""``Client.compile`` takes an MLIR module from jaxlib 0.8; before, serialized bytes or text."""


def compile_stablehlo(
    module: Any,
    devices: Sequence[Any],
    num_replicas: int,
    num_partitions: int,
    options: Mapping[str, Any] | None = None,
) -> Any:
    """Run the full XLA pipeline of ``devices``' compiler over ``module`` (no execution).

    Compiles through the devices' own client, so a module lowered on the CPU for ``tpu`` or
    ``cuda`` is judged by exactly the compiler a user's accelerator job would run. ``options``:
    XLA flags for this compile alone (``{"xla_disable_automatic_host_compute_offload": True}``),
    as ``jit(...).compile(compiler_options=...)`` passes them (JAX 0.4.35 - 0.12.0.1).
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
    compile_options = compiler.get_compile_options(
        num_replicas=num_replicas,
        num_partitions=num_partitions,
        device_assignment=assignment,
        env_options_overrides=dict(options) if options else None,
    )
    chosen = xla_client.DeviceList(tuple(devices[: num_replicas * num_partitions]))
    return client.compile(module, executable_devices=chosen, compile_options=compile_options)


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
