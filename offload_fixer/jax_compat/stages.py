"""A lowered program compiled from another module of the same signature, for ``run`` on an
accelerator: the compilation that failed is compiled again without its offload, so that the
program goes on (:mod:`offload_fixer.accelerator`).

Part of :mod:`offload_fixer.jax_compat`: JAX offers no public way to compile a module of one's
own into a ``jax.stages.Compiled`` that takes and returns the program's arrays. The private
names used here (``Lowered._lowering``, a ``MeshComputation`` whose ``_hlo`` and
``compile_args`` it compiles, ``core.MemorySpace``) are those of JAX 0.10.2 and 0.12.0.1.
"""

from __future__ import annotations

import copy
from typing import Any

from offload_fixer.model import HOST_KINDS, PINNED_HOST


def device_memory_lowering(lowered: Any, module_text: str) -> Any:
    """``lowered`` (a ``jax.stages.Lowered`` for the local backend) compiling ``module_text``
    instead of its own module: the same program with every host memory kind made device
    memory. Its arguments, results and their types say device memory too, so the
    ``Compiled`` it gives takes the arguments moved to device (:func:`device_twin`) and
    returns device arrays. Raises ``TypeError`` where this JAX's lowering is not one this
    function knows."""
    from jax._src import stages

    from offload_fixer.jax_compat import parse_stablehlo

    lowering = getattr(lowered, "_lowering", None)
    if lowering is None or not hasattr(lowering, "compile_args") or not hasattr(lowering, "_hlo"):
        raise TypeError(f"cannot recompile a {type(lowering).__name__} lowering under this JAX")
    twin = copy.copy(lowering)
    twin._hlo = parse_stablehlo(module_text)
    twin._executable = None
    arguments = dict(lowering.compile_args)
    for name in ("in_shardings", "out_shardings"):
        arguments[name] = tuple(device_sharding(s) for s in arguments[name])
    for name in ("global_in_avals", "global_out_avals"):
        arguments[name] = tuple(_device_aval(a) for a in arguments[name])
    twin.compile_args = arguments
    return stages.Lowered(
        twin,
        lowered.args_info,
        lowered.out_tree,
        getattr(lowered, "_no_kwargs", False),
        getattr(lowered, "_in_types", None),
        getattr(lowered, "_out_types", None),
    )


def declared_memory_kinds(lowered: Any) -> list[str | None]:
    """Each flat output's memory kind as the program declares it (its ``out_shardings``, else
    its type: memory space is part of the type from JAX 0.7.1); ``None`` where neither says."""
    arguments = lowered._lowering.compile_args
    kinds: list[str | None] = []
    for sharding, aval in zip(arguments["out_shardings"], arguments["global_out_avals"]):
        kind = getattr(sharding, "memory_kind", None)
        if kind is None:
            space = getattr(aval, "memory_space", None)
            kind = PINNED_HOST if getattr(space, "name", "") == "Host" else None
        kinds.append(kind)
    return kinds


def device_sharding(sharding: Any) -> Any:
    """``sharding`` in the device's own memory where it names a host memory kind."""
    if getattr(sharding, "memory_kind", None) in HOST_KINDS:
        return sharding.with_memory_kind(default_memory_kind(sharding))
    return sharding


def default_memory_kind(sharding: Any) -> str:
    """The memory kind of the devices of ``sharding`` that JAX places arrays in by default."""
    return str(next(iter(sharding.device_set)).default_memory().kind)


def _device_aval(aval: Any) -> Any:
    from jax._src import core

    space = getattr(aval, "memory_space", None)
    if space is None or space == core.MemorySpace.Device:
        return aval
    return aval.update(memory_space=core.MemorySpace.Device)


def device_twin(value: Any) -> Any:
    """An array committed to host memory, copied to its device's memory; anything else as is."""
    import jax

    sharding = getattr(value, "sharding", None)
    if isinstance(value, jax.Array) and getattr(sharding, "memory_kind", None) in HOST_KINDS:
        return jax.device_put(value, device_sharding(sharding))
    return value


def in_memory(value: Any, kind: str | None) -> Any:
    """``value`` (a device array) moved to memory ``kind`` where that is another memory."""
    import jax

    sharding = getattr(value, "sharding", None)
    if kind is None or sharding is None or sharding.memory_kind == kind:
        return value
    return jax.device_put(value, sharding.with_memory_kind(kind))


def compiled_memory(compiled: Any) -> dict[str, int] | None:
    """A ``jax.stages.Compiled``'s memory analysis as :func:`~offload_fixer.jax_compat.memory_figures`
    reads an executable's (``None`` where the backend gives none)."""
    from offload_fixer.jax_compat import MEMORY_STAT_FIELDS

    try:
        stats = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - a backend that does not implement it raises its own error
        return None
    if stats is None:
        return None
    return {name: int(getattr(stats, attribute, 0) or 0) for name, attribute in MEMORY_STAT_FIELDS.items()}
