"""The one place that knows how JAX versions differ.

Three regimes decide how JAX assigns memory kinds to outputs (see ``shared/spec/jax-versions.md``):

* ``LEGACY`` (<= 0.4.28): never inferred; a result is host only if ``out_shardings`` says so.
* ``PROPAGATION`` (0.4.29 - 0.7.0): a small propagation pass with rules for ``device_put``,
  ``scan`` and ``copy``; anything else loses the kind.
* ``TYPED`` (>= 0.7.1): memory space is part of the type; outputs follow types.

Everything else in the package asks this module instead of comparing versions itself.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

OLDEST_SUPPORTED = (0, 4, 35)
"""Oldest JAX the dynamic analysis runs under; static rules and spellings reach further back."""


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


@functools.lru_cache(maxsize=None)
def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jax")
    except PackageNotFoundError as exc:  # pragma: no cover - jax is a dependency
        raise UnsupportedJaxVersion("JAX is not installed") from exc


def regime(version: str | None = None) -> Regime:
    v = parse_version(version or installed_version())
    if v <= (0, 4, 28):
        return Regime.LEGACY
    if v <= (0, 7, 0):
        return Regime.PROPAGATION
    return Regime.TYPED


@dataclass(frozen=True)
class Spelling:
    """How source code written for a JAX version moves to device and declares host outputs."""

    version: str
    regime: Regime
    device_kind: str
    """The memory kind name of device memory: ``"device"`` (``"tpu_hbm"`` before 0.4.25)."""
    host_kind: str
    """The memory kind name a host output is declared with."""
    memory_space_api: bool
    """``jax.device_put(x, jax.memory.Space.Device)`` exists (>= 0.7.1)."""
    transfer_to_memory_kind: bool
    """``jax._src.sharding_impls.TransferToMemoryKind`` exists (0.4.15 - 0.7.0)."""
    none_leaf_inherits_host: bool
    """An ``out_shardings`` leaf of ``None`` keeps a host memory kind (>= 0.4.29)."""
    tree_map: str
    """The ``jax`` attribute path of ``tree_map``: ``tree.map`` (>= 0.4.25), else ``tree_util.tree_map``."""


def spelling(version: str | None = None) -> Spelling:
    text = version or installed_version()
    v = parse_version(text)
    old_names = v < (0, 4, 25)
    return Spelling(
        version=text,
        regime=regime(text),
        device_kind="tpu_hbm" if old_names else "device",
        host_kind="unpinned_host" if old_names else "pinned_host",
        memory_space_api=v >= (0, 7, 1),
        transfer_to_memory_kind=(0, 4, 15) <= v <= (0, 7, 0),
        none_leaf_inherits_host=v >= (0, 4, 29),
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
def lower_for_platform(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], platform: str
) -> Any:
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
    except Exception:  # pragma: no cover - very old backends
        return False
    return "pinned_host" in kinds


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
        from jax._src.sharding_impls import TransferToMemoryKind

        return TransferToMemoryKind(memory_kind)
    raise UnsupportedJaxVersion(
        f"jax {installed_version()} on {device.platform} has no {memory_kind!r} memory and no "
        "TransferToMemoryKind to move a value there inside jit"
    )


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
    return list(
        topologies.get_topology_desc(platform="cuda", topology=topology, target_config=target_config).devices
    )


def parse_stablehlo(text: str) -> Any:
    """StableHLO text (with locations) as a module of JAX's own MLIR context."""
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir

    return ir.Module.parse(text, context=jax_mlir.make_ir_context())


def compile_stablehlo(module: Any, devices: Sequence[Any], num_replicas: int, num_partitions: int) -> Any:
    """Run the full XLA pipeline of ``devices``' compiler over ``module`` (no execution).

    Compiles through the devices' own client, so a module lowered on the CPU for ``tpu`` or
    ``cuda`` is judged by exactly the compiler a user's accelerator job would run.
    """
    import numpy as np
    from jax._src import compiler
    from jax._src.lib import xla_client

    client = devices[0].client
    assignment = np.array([d.id for d in devices[: num_replicas * num_partitions]]).reshape(num_replicas, num_partitions)
    options = compiler.get_compile_options(
        num_replicas=num_replicas,
        num_partitions=num_partitions,
        device_assignment=assignment,
    )
    chosen = devices[: num_replicas * num_partitions]
    if hasattr(xla_client, "DeviceList"):
        return client.compile(module, executable_devices=xla_client.DeviceList(tuple(chosen)), compile_options=options)
    return client.compile(module, compile_options=options)  # pragma: no cover - jaxlib < 0.4.36


def output_memory_kinds(executable: Any) -> list[str]:
    """Each flat output's memory kind in a compiled executable (one device's view)."""
    kinds = executable.get_output_memory_kinds()
    return list(kinds[0]) if kinds and isinstance(kinds[0], (list, tuple)) else list(kinds)


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


def stablehlo_to_hlo(text: str) -> Any:
    """jaxlib's own MLIR -> HLO translation of a module (the first step of every XLA
    compile), as an ``HloModule`` whose instructions carry the names XLA's messages print."""
    from jax._src.lib import xla_client

    computation = xla_client._xla.mlir.mlir_module_to_xla_computation(text, use_tuple_args=False, return_tuple=False)
    return computation.get_hlo_module()
