"""The fixed source lowered again before it is written, analysed again, and compiled where the
compiler is installed: what the verification stage (:mod:`offload_fixer.verify.stage`) asks
of each candidate plan.

``run`` knows each checked compilation's function and its arguments as shapes and shardings
(``report_file.AbstractCall``). Where it holds the live function (``run``, a kernel), the fixed
function is rebuilt in a copy of its module's namespace (:mod:`.namespace`): the program is
never run again, so a script with statements at module level is verified like a module. A saved
report (``fix REPORT``) holds none: there the fixed files are imported as fresh modules
(:func:`.fixed_modules.fixed_modules`), only where importing them runs nothing
(``require_safe``). The function, with the jit options the fixed source gives it (a jit built
inside ``main()``: the recorded options, the fixed call's shardings evaluated), is lowered for the
target with the recorded arguments, analysed again, and compiled. One that cannot be lowered so
is ``not verified``, with the reason (:class:`Unverifiable`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from offload_fixer.model import Diagnostic, FunctionRef, MemoryFigures, XlaVerdict
from offload_fixer.verify.fixed_modules import Unverifiable, fixed_modules
from offload_fixer.verify.jit_sites import find_jitted, from_factory, jit_options_at_site

if TYPE_CHECKING:
    from offload_fixer.topology import Topology


@dataclass(frozen=True)
class FixCheck:
    confirmed: bool
    reason: str
    """Why the fix is refused (or what XLA said when it compiled it: empty)."""
    verdict: XlaVerdict | None = None
    located: bool = True
    """The fixed function was found (else nothing was lowered)."""
    lowered: bool = True
    """The fixed function lowered (a refusal with ``lowered`` is the compiler's)."""
    found: tuple[Diagnostic, ...] = ()
    """What the analysis of the fixed lowering finds: a fix removes only the findings of its
    root cause that are not among them, and may leave no new error."""
    moved: int | None = None
    """Bytes one call of the fixed program copies between host and device memory
    (:func:`~offload_fixer.ir.transfers.bytes_moved`)."""

    @property
    def remaining(self) -> tuple[tuple[str, str, str], ...]:
        """:func:`finding_key` of each finding the fixed lowering still has."""
        return tuple(dict.fromkeys(finding_key(d) for d in self.found))


def compile_fixed(
    texts: Mapping[str, str],
    function: FunctionRef,
    call: Any,
    target: str,
    compile: bool = True,
    host_outputs: Sequence[int] = (),
    require_safe: bool = False,
    no_offload: bool = False,
    originals: Mapping[str, str] | None = None,
    parts: Collection[str] = (),
    topology: Topology | None = None,
) -> FixCheck:
    """Lower ``function`` from the fixed files ``texts`` (path: new contents, every file of
    the plans: the function's module and its jit site's; ``originals``: their contents as
    analysed, else read from disk) and, with ``compile``, compile it. ``call``: the recorded
    call (its function ``fun`` where the run has it, its ``args``/``kwargs`` as shapes and
    shardings). Lowering needs JAX only: a fix whose ``out_shardings`` does not fit the returned
    pytree, or whose edit no longer traces, fails here. ``host_outputs``: the outputs declared
    host memory before compiling (those of findings this text leaves unfixed, so that XLA judges
    the rest, as ``--confirm`` does). ``require_safe``: where the files must be imported (no
    live function), one whose import would run the program is not (the check says so,
    ``located`` false). ``no_offload``: every host memory kind of the lowered module made device
    memory before compiling (:func:`~offload_fixer.xla.confirm.without_offload`). ``parts``: the
    files a program at ``function.path`` is made of (a kernel's cells). ``topology``: the pod the
    run checked for (``--topology``), whose devices it compiles for."""
    from offload_fixer.xla.confirm import with_host_output, without_offload
    from offload_fixer.xla.oracle import module_text, oracle

    texts = {_absolute(p): t for p, t in texts.items()}
    originals = {_absolute(p): t for p, t in (originals or {}).items()}
    try:
        with fixed_jit(texts, originals, function, call, require_safe, parts) as (jitted, scope):
            try:
                lowered = lower_fixed(jitted, scope, call.args, call.kwargs, target)
            except Exception as exc:  # noqa: BLE001
                return FixCheck(
                    False, f"the fixed `{function.name}` no longer lowers: {type(exc).__name__}: {exc}", lowered=False
                )
    except Unverifiable as exc:
        return FixCheck(False, f"not verified: {exc}", located=False, lowered=False)
    found = analysed_again(lowered, target, function)
    moved = transfers(lowered)
    aborts = donation_abort(lowered, function)
    if aborts is not None:
        return FixCheck(False, aborts, found=found, moved=moved)
    if not compile:
        return FixCheck(True, "", found=found, moved=moved)
    text = module_text(lowered)
    for index in dict.fromkeys(host_outputs):
        text = with_host_output(text, index)
    if no_offload:
        text = without_offload(text)
    verdict = oracle(target, topology).judge(text)
    if verdict.outcome == "compiled":
        return FixCheck(True, "", verdict, found=found, moved=moved)
    from offload_fixer.xla_messages import summary

    said = summary(verdict.message) or verdict.outcome
    return FixCheck(
        False,
        f"{verdict.compiler} still rejects the fixed `{function.name}`: {said}",
        verdict,
        found=found,
        moved=moved,
    )


@contextmanager
def fixed_jit(
    texts: Mapping[str, str],
    originals: Mapping[str, str],
    function: FunctionRef,
    call: Any,
    require_safe: bool,
    parts: Collection[str] = (),
) -> Iterator[tuple[Any, Any]]:
    """(the fixed function jitted as the fixed source jits it, the namespace or module it was
    built in). The live function's namespace where the run holds it and the fix edits no other
    file; else the fixed files imported (:func:`.fixed_modules.fixed_modules`)."""
    import jax

    from offload_fixer.verify.namespace import fixed_callable, fixed_namespace, has_namespace, instance_names

    path = _absolute(function.path or "")
    fun = getattr(call, "fun", None)
    if fun is not None and has_namespace(fun, path, parts) and set(texts) <= {path}:
        before = originals.get(path)
        if before is None:
            before = _read(path)
        after = texts.get(path, before)
        with fixed_namespace(fun, path, before, after) as scope:
            built, jitted = fixed_callable(fun, scope, path, after)
            if jitted:
                yield built, scope
                return
            found = find_jitted(scope, function)
            if found is not None and _jits(found, built):
                yield found, scope
                return
            names = {**vars(scope), **instance_names(fun)}
            site = os.path.abspath(function.jit_path) if function.jit_path else path
            site_before = before if site == path else None
            site_after = after if site == path else None
            yield jax.jit(built, **jit_options_at_site(function, call, site_before, site_after, names)), scope
        return
    with fixed_modules(texts, require_safe) as load:
        module = load(path)
        jitted = find_jitted(module, function)
        if jitted is None and function.jit_path:
            jitted = _jit_at_imported_site(load(function.jit_path), texts, function, module, call)
        if jitted is None:
            raise Unverifiable(f"`{function.name}` is not jitted at module level in the fixed file")
        yield jitted, module


def _absolute(path: str) -> str:
    """A file's absolute path; a program's name that is no file (``<ipython cells>``) as it is."""
    return path if path.startswith("<") else os.path.abspath(path)


def _jits(jitted: Any, function: Any) -> bool:
    """Whether ``jitted`` wraps ``function`` (the fixed one, rebound in the namespace)."""
    from offload_fixer.api import python_function

    return python_function(jitted) is python_function(function)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise Unverifiable(f"{os.path.basename(path)} cannot be read: {exc}") from None


def _jit_at_imported_site(site: Any, texts: Mapping[str, str], function: FunctionRef, module: Any, call: Any) -> Any:
    """The jit of ``function`` at its jit site (``function.jit_path``) where the fixed files are
    imported: the site module's own module-level jit, else (a jit built inside ``main()``) the
    fixed function (or the fixed factory's inner ``def`` with the recorded closure) jitted with
    the recorded options and the shardings the fixed call spells, evaluated with the site
    module's names."""
    import jax

    from offload_fixer.api import python_function

    found = find_jitted(site, function)
    if found is not None:
        return found
    path = os.path.abspath(function.jit_path or "")
    before = _read(path)
    options = jit_options_at_site(function, call, before, texts.get(path, before), vars(site))
    fun = python_function(getattr(module, function.name, None))
    if fun is None:
        fun = from_factory(module, function, call)
    if fun is None:
        raise Unverifiable(f"`{function.name}` is not defined at module level in the fixed file")
    return jax.jit(fun, **options)


def finding_key(diagnostic: Any) -> tuple[str, str, str]:
    """What identifies a finding across the unfixed and the fixed source, whose lines differ:
    its code and its origin (kind, argument)."""
    origin = diagnostic.origin
    return (diagnostic.code, origin.kind if origin else "", (origin.argument or "") if origin else "")


def transfers(lowered: Any) -> int | None:
    """Bytes one call of ``lowered`` moves between host and device memory (``None`` where the
    module cannot be read)."""
    from offload_fixer.ir.module import ModuleReadError, load
    from offload_fixer.ir.transfers import bytes_moved

    try:
        return bytes_moved(load(lowered))[0]
    except ModuleReadError:
        return None


def donation_abort(lowered: Any, function: FunctionRef) -> str | None:
    """Why the fixed lowering would abort the process when it runs (``None`` where it would
    not): it gives a donated host buffer to a device output. Only the module says which
    output JAX matched the buffer to: with a one-device mesh the same source may alias the
    buffer to another output than with eight."""
    from offload_fixer.ir.module import ModuleReadError, load

    try:
        why = load(lowered).donation_abort()
    except ModuleReadError:
        return None
    return None if why is None else f"the fixed `{function.name}` would abort when it runs: {why}"


def analysed_again(lowered: Any, target: str, function: FunctionRef) -> tuple[Diagnostic, ...]:
    """What the analysis finds in the fixed lowering (nothing where the module cannot be read:
    nothing is claimed left)."""
    from offload_fixer.analysis import ModuleReadError, analyze

    try:
        report = analyze(lowered, target, function=function)
    except ModuleReadError:
        return ()
    return report.diagnostics


def original_memory(
    function: FunctionRef,
    call: Any,
    target: str,
    host_outputs: Sequence[int],
    declared: bool = True,
    topology: Topology | None = None,
) -> tuple[MemoryFigures, str] | None:
    """The memory figures of ``function`` as the unfixed files have it, with the outputs
    error 1200 names declared host memory (the program XLA accepts unchanged, as ``--confirm``
    compiles it), and which baseline they are (``model.HOST_OUTPUTS_BASELINE``): what a
    fix's figures are compared with. Where XLA cannot compile that either (libtpu has no
    scatter or update into a host buffer, no loop over a whole host stack, no host result of
    a donated host update: measured on the fix-quality corpus), or ``declared`` is false (the
    run's ``--confirm`` already found it rejected), the same program without its offload
    (``model.NO_OFFLOAD_BASELINE``). ``None`` where neither compiles."""
    from offload_fixer.model import HOST_OUTPUTS_BASELINE, NO_OFFLOAD_BASELINE

    if declared:
        check = compile_fixed(
            {}, function, call, target, host_outputs=host_outputs, require_safe=True, topology=topology
        )
        if check.verdict is not None and check.verdict.memory is not None:
            return check.verdict.memory, HOST_OUTPUTS_BASELINE
        if not check.lowered:
            return None
    found = without_offload_memory(function, call, target, topology)
    return (found, NO_OFFLOAD_BASELINE) if found is not None else None


def without_offload_memory(
    function: FunctionRef, call: Any, target: str, topology: Topology | None = None
) -> MemoryFigures | None:
    """The memory figures of ``function`` as the unfixed files have it with every host memory
    kind made device memory: the program without its offload, which a fix for offloaded state
    must hold less HBM than (``None`` where it does not compile)."""
    check = compile_fixed({}, function, call, target, no_offload=True, require_safe=True, topology=topology)
    return check.verdict.memory if check.verdict is not None else None


def lower_fixed(jitted: Any, module: Any, args: tuple, kwargs: dict, target: str) -> Any:
    """``jitted`` (from the fixed ``module``) lowered for ``target`` with the recorded arguments,
    their dataclass and NamedTuple nodes rebuilt from the fixed module's classes of the same
    name: the recorded ones belong to the original module, whose pytree types JAX compares by
    identity with the ``in_shardings`` the fixed module builds."""
    from offload_fixer import jax_compat

    args, kwargs = rehome((args, kwargs), module)
    return jax_compat.lower_for_platform(jitted, args, kwargs, jax_compat.lowering_platform(target))


def rehome(value: Any, module: Any) -> Any:
    """``value`` with each dataclass or NamedTuple whose class ``module`` also defines (by
    qualified name, a class of another module) rebuilt as an instance of ``module``'s class."""
    kind = type(value)
    own = _same_class(kind, module)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (own or kind)(*(rehome(v, module) for v in value))
    if isinstance(value, (tuple, list)):
        return kind(rehome(v, module) for v in value)
    if isinstance(value, dict):
        return {k: rehome(v, module) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: rehome(getattr(value, f.name), module) for f in dataclasses.fields(value)}
        built: Any = object.__new__(own or kind)
        for name, field_value in changes.items():
            object.__setattr__(built, name, field_value)
        return built
    return value


def _same_class(kind: type, module: Any) -> type | None:
    found: Any = module
    for part in kind.__qualname__.split("."):
        found = getattr(found, part, None)
        if found is None:
            return None
    return found if isinstance(found, type) and found is not kind else None
