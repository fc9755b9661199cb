"""JAX's tracing machinery as the runner observes it (trace state, tracers, the compilations
JAX makes for itself), and starting JAX under ``run`` on a machine without an accelerator.

Part of :mod:`offload_fixer.jax_compat`: each private ``jax._src`` name used here says the
releases it was checked in.
"""

from __future__ import annotations

import functools
import re
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from offload_fixer.model import HOST_KINDS


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
InterceptedCompilation = Callable[
    [Any, Sequence[Any], Callable[[str], Any], Callable[[], Sequence[Any]]], Sequence[Any]
]
"""``(fun, flat arguments, lower, proceed) -> flat results``, before JAX compiles: ``proceed()``
is JAX's own compile and run (its flat results); other results replace them."""


@contextmanager
def observe_compilations(
    observer: InternalCompilation, intercept: InterceptedCompilation | None = None
) -> Iterator[bool]:
    """Call ``observer`` after every jit call that misses JAX's C++ dispatch cache (the first
    call of a signature), JAX's own jits included: an eager ``x * 2`` or ``x.reshape(-1)``
    runs ``jnp.multiply``'s jit or a jit of the primitive (``dispatch.apply_primitive``),
    compiled like any other. With ``intercept``, each such call goes through it instead,
    before JAX compiles (``run`` on an accelerator: an eager operation is checked before it
    runs); what it returns is the call's result, and such a call is never cached, so the
    next one is intercepted too. Yields False where this JAX's dispatch is not one this
    module knows (nothing is observed then).

    The hook is the Python function each cache miss calls: ``pjit._run_python_pjit`` in recent
    JAX (0.10, 0.12: it receives the inferred parameters, from which ``stages.Traced`` is
    rebuilt as ``jit(...).trace`` does), ``pjit._python_pjit_helper`` before (0.4.35, 0.6.2:
    re-traced through ``jit_trace`` or ``_make_jit_wrapper``; not intercepted).
    """
    import inspect

    from jax._src import pjit

    reentered = threading.local()

    @contextmanager
    def ours() -> Iterator[bool]:
        """False inside a compilation the observer itself caused (lowering for the target, a
        patched run): those are not observed again."""
        if getattr(reentered, "active", False):
            yield False
            return
        reentered.active = True
        try:
            yield True
        finally:
            reentered.active = False

    def notify(fun: Any, args_flat: Sequence[Any], out_flat: Sequence[Any], lower: Callable[[str], Any]) -> None:
        with ours() as observed:
            if observed:
                observer(fun, args_flat, out_flat, lower)

    modern = getattr(pjit, "_run_python_pjit", None)
    legacy = getattr(pjit, "_python_pjit_helper", None)
    replacement: Callable[..., Any]
    if modern is not None and list(inspect.signature(modern).parameters)[:3] == ["p", "args_flat", "fun"]:
        from jax._src import api_util, stages
        from jax.tree_util import tree_unflatten

        # JAX 0.12 also takes the function's source description (for its error messages).
        wants_source = "fun_sourceinfo" in inspect.signature(stages.Traced.__init__).parameters

        def run_python_pjit(p, args_flat, fun, args, kwargs):
            def lower(platform: str) -> Any:
                arg_types = [pjit.convert_to_metaty(a) for a in args_flat]
                source = (api_util.fun_sourceinfo(fun),) if wants_source else ()
                traced = stages.Traced(arg_types, p.params, p.in_tree, p.out_tree, p.consts, *source)
                return traced.lower(lowering_platforms=(platform,))

            if intercept is None or getattr(reentered, "active", False):
                result = modern(p, args_flat, fun, args, kwargs)
                notify(fun, args_flat, result[1], lower)
                return result
            ran: list[Any] = []

            def proceed() -> Sequence[Any]:
                ran.append(modern(p, args_flat, fun, args, kwargs))
                return ran[0][1]

            with ours():
                out_flat = intercept(fun, args_flat, lower, proceed)
            if ran and ran[0][1] is out_flat:
                return ran[0]
            # (outs, out_flat, out_tree, args_flat, jaxpr, executable, profiler, const_args) as
            # JAX 0.10 and 0.12 return them; no executable: the C++ cache keeps nothing of it
            out_flat = list(out_flat)
            return (
                tree_unflatten(p.out_tree, out_flat),
                out_flat,
                p.out_tree,
                args_flat,
                p.params["jaxpr"],
                None,
                None,
                [],
            )

        name, replacement, original = "_run_python_pjit", run_python_pjit, modern
    elif (
        legacy is not None
        and list(inspect.signature(legacy).parameters)[:2] == ["fun", "jit_info"]
        and intercept is None
    ):

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


@contextmanager
def frames_not_the_users(prefixes: Sequence[str]) -> Iterator[None]:
    """While the block runs, JAX takes no frame of a file under ``prefixes`` (the tool's own
    package, runpy's frozen module) for the user's: the source locations of a lowered module
    then hold the program's frames only, however the tool was started (``offload-fixer``,
    ``python -m offload_fixer``, a profiler), so the same program lowers to the same text.
    ``jax._src.source_info_util``'s exclusions (``register_exclusion`` and the private
    ``_exclude_paths`` it appends to, the same in 0.4.35 - 0.12.0.1)."""
    from jax._src import source_info_util

    added = [prefix for prefix in prefixes if prefix not in source_info_util._exclude_paths]
    for prefix in added:
        source_info_util.register_exclusion(prefix)
    try:
        yield
    finally:
        for prefix in added:
            source_info_util._exclude_paths.remove(prefix)
        for cached in (source_info_util._exclude_path_regex, getattr(source_info_util, "is_user_filename", None)):
            clear = getattr(cached, "cache_clear", None)
            if clear is not None:
                clear()


@functools.cache
def jax_roots() -> tuple[str, ...]:
    """The directories of the installed ``jax`` and ``jaxlib`` packages (with a trailing
    separator): a frame or function from under them is JAX's own, not the user's."""
    import os

    import jax
    import jaxlib

    return tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (jax, jaxlib) if m.__file__ is not None)


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
    # JAX's TPU start-up on a TPU VM (jax/_src/cloud_tpu_init.py, JAX 0.4.35 - 0.12), a Python
    # warning: its line, then the line of source Python prints under it
    r".*cloud_tpu_init\.py:\d+: UserWarning: Transparent hugepages are not enabled\..*",
)
"""What the released compilers' plugins write to stderr while JAX starts on a machine without
their hardware: a line each, in this order, measured with libtpu 0.0.17.1, 0.0.42.1, 0.0.50.1
and jax-cuda12-plugin 0.10.2, 0.12.0.1; and what JAX's TPU start-up warns of on a TPU v5e VM
(JAX 0.10.2, libtpu 0.0.42.1). None of it is about the user's program."""
_WARNING_SOURCE = re.compile(r"\s+warnings\.warn\(")
"""The source line Python prints under a warning: left out with a warning that is noise."""
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


def accelerator_platform() -> str | None:
    """The accelerator JAX's default backend will be here: ``"tpu"``, ``"gpu"``, or ``None``
    for the CPU. ``JAX_PLATFORMS`` (or ``JAX_PLATFORM_NAME``) decides where the user set it
    (its first platform), else the hardware JAX would find (:func:`accelerator_visible`'s
    probes). Cheap: no plugin is loaded, no backend started."""
    import os

    from jax._src import hardware_utils

    chosen = os.environ.get("JAX_PLATFORMS") or os.environ.get("JAX_PLATFORM_NAME")
    if chosen:
        first = chosen.split(",")[0].strip().lower()
        return "tpu" if first == "tpu" else "gpu" if first in ("cuda", "rocm", "gpu") else None
    if hardware_utils.num_available_tpu_chips_and_device_id()[0] > 0:
        return "tpu"
    if hardware_utils.has_visible_nvidia_gpu() or os.path.exists("/dev/kfd"):
        return "gpu"
    return None


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


@contextmanager
def without_start_up_noise(verbose: bool = False) -> Iterator[None]:
    """Leave out what a plugin prints while it loads without its hardware (libtpu building a
    pod's compile-only devices, :func:`~offload_fixer.jax_compat.pod.start`)."""
    with _stderr_without_start_up_noise(verbose):
        yield


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
            in_traceback = after_noise = False
            for line in text.splitlines(keepends=True):
                if in_traceback and _TRACEBACK_LINE.match(line):
                    continue
                if after_noise and _WARNING_SOURCE.match(line.rstrip("\r\n")):
                    after_noise = False
                    continue
                in_traceback = state.plugins_fail_as_noise and line.startswith(_PLUGIN_FAILURE)
                after_noise = bool(noise.fullmatch(line.rstrip("\r\n")))
                if not in_traceback and not after_noise:
                    kept.append(line)
            if kept:
                os.write(2, "".join(kept).encode())


def jit_options(jitted: Any) -> dict[str, Any] | None:
    """The options ``jax.jit`` was given for ``jitted`` (``in_shardings``, ``out_shardings``
    where the user set them, donation, static arguments), to jit a fixed function again as
    the program did where that jit is built inside a function (``main()``) and importing the
    fixed source cannot rebuild it. From ``PjitInfo`` (``_jit_info``, private, the same in
    JAX 0.4.35 to 0.12); ``None`` where the object has none."""
    info = getattr(jitted, "_jit_info", None)
    if info is None:
        return None

    def tree(treedef: Any, leaves: Any) -> Any:
        if any(type(leaf).__name__ == "UnspecifiedValue" for leaf in leaves):
            return None
        return treedef.unflatten(leaves)

    options: dict[str, Any] = {
        "donate_argnums": tuple(info.donate_argnums),
        "static_argnums": tuple(info.static_argnums),
        "static_argnames": tuple(info.static_argnames),
        "keep_unused": info.keep_unused,
    }
    for name in ("in_shardings", "out_shardings"):
        value = tree(getattr(info, f"{name}_treedef"), getattr(info, f"{name}_leaves"))
        if value is not None:
            options[name] = value
    return options
