"""How ``offload-fixer run`` sees every jit compilation of a program it runs unchanged.

Before the program is imported, ``jax.jit`` is replaced by a function that
returns the real jitted object inside a thin stand-in. The stand-in delegates everything to
the real object; on a call, ``.lower(...)`` or ``.trace(...)`` it computes the abstract
signature of the arguments (shapes, dtypes, weak types, shardings, static values) and, the
first time a (function, jit options, signature) triple is seen, lowers the same function for
the accelerator with ``jitted.trace(...).lower(lowering_platforms=(platform,))`` and runs the
analysis. JAX caches the trace, so the user's function is not traced twice. The check runs
after the user's own operation: a failure in the tool never changes what the program does,
and is recorded as a tool warning.

Eager operations are checked too: an eager ``x * 2`` or ``x.reshape(-1)`` compiles one of
JAX's own jits (``jnp.multiply``'s, or a jit of the primitive through
``dispatch.apply_primitive``). Each such compilation that takes or returns an array in host
memory (other than the device's default memory) is lowered for the target and analysed like
a user's jit, and reported at the user's line (``jax_compat.tracing.observe_compilations`` hooks
JAX's Python dispatch for this). On TPU such an operation is host compute at best, and
error 1200 where JAX declares its result device memory.

What is not intercepted:

* jit objects created before the patch: modules imported by ``sitecustomize``/``.pth`` files,
  or by whatever imported ``offload_fixer`` first;
* ``jax._src.api.jit`` and whatever JAX jits on the user's behalf (``jax.eval_shape`` jits the
  user's function internally, and that is not a compilation), and ``jax.experimental.pjit.pjit``;
* ``jax.pmap`` and ``xmap``, and functions compiled only through ``jax.export``;
* jitted functions called inside another trace: they are part of the outer compilation,
  which is checked as a whole;
* child processes (``multiprocessing``, ``subprocess``): they start without the patch.

Caveats: ``isinstance`` checks against JAX's jitted-function type see the stand-in; each call
of a jitted function costs a few microseconds more (its signature is computed and looked up;
``benchmarks/run_overhead.py`` measures it).

Over 500 lines on purpose: the stand-in, the abstract signatures it computes and the checker
it calls share one cache of the compilations seen.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import runpy
import sys
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from offload_fixer.jax_compat.tracing import jax_roots
from offload_fixer.model import EAGER_SUFFIX, Diagnostic, FunctionRef, RematPolicy, Report, Span, normalize_target
from offload_fixer.report_file import AbstractCall, abstract_arguments, read_source_bytes, report_paths

if TYPE_CHECKING:
    from offload_fixer.accelerator import AcceleratorRun, Route, StopProgram
    from offload_fixer.console import Progress
    from offload_fixer.jax_compat.pod import Pod
    from offload_fixer.topology import Topology
    from offload_fixer.verdicts import VerdictCache

TOOL_FRAMES = (os.path.abspath(__file__), os.path.abspath(runpy.__file__), "<frozen runpy>")
"""Files whose frames are the stand-in's or runpy's (which runs the program), never the user's."""


@dataclass(frozen=True)
class ProgramStop:
    """Where the tool stopped the program, and why: under ``--topology`` it needed the pod's
    chips to go on; or its next call would have aborted the process (:class:`WouldAbort`)."""

    message: str
    """``calling jit(init) needs the v5e-256 pod's chips, ...``."""
    span: Span | None
    """The program's own line that asked for them."""


class WouldAbort(BaseException):
    """Stops the program at a call that would abort the process, so that the findings are
    reported rather than lost with it. A ``BaseException``: the program's own ``except
    Exception`` does not swallow it."""


@dataclass
class RunResult:
    target: str
    reports: list[Report] = field(default_factory=list)
    """One per distinct (function, diagnostics); identical findings from recompilations merge."""
    program_exit_code: int = 0
    program_exception: str | None = None
    """The program's own traceback (or ``SystemExit`` message), as Python would print it."""
    tool_warnings: list[str] = field(default_factory=list)
    checked: int = 0
    """Distinct compilations lowered and analysed."""
    intercepted: int = 0
    """Calls, ``.lower`` and ``.trace`` of jitted functions that went through the stand-in."""
    sources: dict[str, str] = field(default_factory=dict)
    """sha256 of every source file the reports point at, taken when it was analysed."""
    deferred: bool = False
    """The program left threads running: ``run_program``'s ``finish`` runs once they end."""
    interrupted: bool = False
    """The program ended with ``KeyboardInterrupt`` (Ctrl-C)."""
    texts: dict[str, str] = field(default_factory=dict)
    """Those files' text as it was hashed: the report keeps the lines its findings name."""
    calls: dict[int, AbstractCall] = field(default_factory=dict)
    """For each report with findings (by its index), the call its fixes are lowered again with."""
    accelerator: AcceleratorRun | None = None
    """Where the local backend is the accelerator: its failures, patches and measurements."""
    stopped: StopProgram | None = None
    """The compilation the program was stopped at (``--no-keep-going``, or no patch compiled)."""
    pod: Pod | None = None
    """Under ``--topology``: the pod the program saw (its fixes are checked seeing it too)."""
    needs_pod: ProgramStop | None = None
    """Under ``--topology``: where the program stopped because it needed the pod's chips."""
    would_abort: ProgramStop | None = None
    """Where the program was stopped because its call would have aborted the process."""
    process: int = 0
    processes: int = 1
    """This process of a ``jax.distributed`` program, and how many there are: process 0's
    result holds every process's findings (:mod:`offload_fixer.processes`)."""
    unheard: list[int] = field(default_factory=list)
    """On process 0: the processes that sent no findings in time."""
    kept: list[str] = field(default_factory=list)
    """The verdict cache's key of each compilation checked (:mod:`offload_fixer.verdicts`)."""

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return [d for report in self.reports for d in report.diagnostics]


# ---------------------------------------------------------------------------------------
# Checking compilations
class CompilationChecker:
    """Lowers each distinct compilation once for the target and collects the reports."""

    def __init__(
        self,
        target: str,
        progress: Progress | None = None,
        confirm: bool = False,
        accelerator: AcceleratorRun | None = None,
        *,
        pod: Pod | None = None,
        topology: Topology | None = None,
        verdicts: VerdictCache | None = None,
    ):
        import jax

        from offload_fixer import jax_compat
        from offload_fixer.jax_compat import tracing as jax_tracing

        target = normalize_target(target)
        self.target = target
        self.progress = progress
        self.platform = jax_compat.lowering_platform(target)
        self.active = True
        self.result = RunResult(target=target, pod=pod)
        self.confirm = confirm
        """Also compile each compilation with the released compiler (``--confirm``)."""
        self.accelerator = accelerator
        """The local backend is the accelerator: each compilation is checked before it compiles
        and guarded (:mod:`offload_fixer.accelerator`)."""
        self.result.accelerator = accelerator
        self._eager_routes: dict[Any, Route] = {}
        self.pod = pod
        """The pod the program sees (``--topology``): a call that executes on it is refused."""
        self.topology = topology
        self.verdicts = verdicts
        """Reports earlier runs kept (:mod:`offload_fixer.verdicts`); ``None``: neither read nor kept."""
        if confirm and self.released_compiler_judges and verdicts is None:
            from offload_fixer import xla

            xla.oracle(target, topology).spawn()  # its start-up overlaps the program's
        self.leaf_signature = LeafSignatures()
        self.tree_flatten = jax.tree_util.tree_flatten
        self.outside_any_trace = jax_tracing.trace_state_check()
        self._seen: set[Any] = set()
        self._identities: dict[Any, int] = {}
        self._report_keys: set[Any] = set()
        self._lock = threading.RLock()

    @property
    def released_compiler_judges(self) -> bool:
        """``--confirm`` compiles with the released compiler, compile-only; on the accelerator
        itself its own compile of the program is the judge instead."""
        return self.accelerator is None or self.accelerator.accelerator.emulated

    def identity(self, fun: Any, options: Any) -> int:
        """A small number for a (function, jit options) pair, so that signatures hash fast and
        a fresh ``jax.jit`` of the same function with the same options shares its checks."""
        with self._lock:
            return self._identities.setdefault((_hashable(fun), options), len(self._identities))

    def observe(self, key: Any) -> bool:
        """Count one intercepted operation; True the first time its ``key`` is seen (the
        caller then checks that compilation). ``None``: a call inside a trace, not counted."""
        if key is None:
            return False
        with self._lock:
            self.result.intercepted += 1
            if key in self._seen:
                return False
            self._seen.add(key)
            return True

    def check(
        self,
        jitted: Any,
        fun: Any,
        args: tuple,
        kwargs: dict,
        failure: BaseException | None = None,
        site: tuple[str, int, int] | None = None,
        lowered: Any = None,
        called_at: tuple[str, int, int] | None = None,
    ) -> Any:
        """Analyse one compilation. ``failure``: the user's own call failed with it, so the
        tool's failures are dropped (its traceback already says why). ``site``: where
        ``jax.jit`` was applied; ``called_at``: where the user's code made the call.
        ``lowered``: the program's own lowering of it, where that is for the target (a pod
        program's ``.lower()``), used instead of lowering it again.
        Returns the compilation lowered for the target, ``None`` where it could not be."""
        report, lowered = self.analyse(
            jitted, fun, args, kwargs, failure is not None, site, lowered, failure, called_at
        )
        if report is not None:
            self.record(report, self.call_of(report, jitted, fun, args, kwargs))
        return lowered

    def analyse(
        self,
        jitted: Any,
        fun: Any,
        args: tuple,
        kwargs: dict,
        quiet: bool = False,
        site: tuple[str, int, int] | None = None,
        lowered: Any = None,
        failure: BaseException | None = None,
        called_at: tuple[str, int, int] | None = None,
    ) -> tuple[Report | None, Any]:
        """(the report, the lowering for the target) of one compilation, not yet recorded;
        ``(None, None)`` where it could not be checked (said as a tool warning, unless
        ``quiet``). ``lowered``: the program's own lowering for the target, not made again.
        Where JAX refuses to trace mixed memory spaces, that refusal is the report (and there
        is no lowering): ``failure``, the user's own call's error, says it with the user's
        frames, ``called_at`` where the user's code made the call."""
        from offload_fixer import jax_compat
        from offload_fixer.api import function_ref

        with self._lock:
            if self.progress is not None:
                self.progress.show(
                    f"offload-fixer: checking {_describe(fun)} for {self.target} "
                    f"({self.result.checked} checked so far)",
                    force=True,
                )
            function = _jitted_at(function_ref(fun), site)
            try:
                lowered, policies = jax_compat.lower_with_policies(jitted, args, kwargs, self.platform, lowered)
                report = self.report(lowered, function, policies)
            except Exception as exc:  # noqa: BLE001 - the tool must never break the program
                at = Span(called_at[0], called_at[1], called_at[2]) if called_at else None
                refusal = self._refusal(failure or exc, jitted, args, kwargs, function, at)
                if refusal is not None:
                    return refusal, None
                if not quiet:
                    self.warn(f"could not check {_describe(fun)} for {self.target}: {_one_line(exc)}")
                return None, None
            finally:
                if self.progress is not None:
                    self.progress.clear()  # the program's own output follows on the terminal
            return report, lowered

    def _refusal(
        self,
        error: BaseException,
        jitted: Any,
        args: tuple,
        kwargs: dict,
        function: FunctionRef | None,
        called_at: Span | None,
    ) -> Report | None:
        """JAX's refusal to trace mixed memory spaces, as a report (``trace_refusals``)."""
        from offload_fixer.api import python_function
        from offload_fixer.trace_refusals import refusal_report

        try:
            defined = python_function(jitted)
            return refusal_report(error, jitted, args, kwargs, self.target, defined, function, called_at)
        except Exception as exc:  # noqa: BLE001 - the tool must never break the program
            self.warn(f"could not read JAX's refusal for {self.target}: {_one_line(exc)}")
            return None

    def call_of(self, report: Report, jitted: Any, fun: Any, args: tuple, kwargs: dict) -> AbstractCall | None:
        """The call a fix of ``report``'s function is lowered again with before it is written."""
        from offload_fixer.jax_compat import tracing as jax_tracing

        if not (self.confirm or report.diagnostics):
            return None
        return AbstractCall(fun, abstract_arguments(args), dict(kwargs), jax_tracing.jit_options(jitted))

    def record(
        self, report: Report, call: AbstractCall | None = None, where: tuple[str, int, int] | None = None
    ) -> None:
        """One checked compilation's report; ``where``: an eager operation's line, where its
        findings are reported."""
        with self._lock:
            self.result.checked += 1
            self._add(_at_user_line(report, where), call)

    def report(self, lowered: Any, function: FunctionRef | None, policies: tuple[RematPolicy, ...] = ()) -> Report:
        """The analysis of ``lowered`` (and the released compiler's verdict with ``--confirm``),
        read from the verdicts an earlier run kept where it kept one for this module and these
        remat ``policies`` (what the traced program applies: the module alone does not show
        a policy that offloads nothing)."""
        from offload_fixer.analysis import analyze
        from offload_fixer.jax_compat import distributed as jax_distributed

        key = None
        judged = self.confirm and self.released_compiler_judges
        if self.verdicts is not None:
            key = self.verdicts.key(lowered, self.target, self.topology, judged, function, policies)
            self.result.kept.append(key)
            kept = self.verdicts.get(key)
            if kept is not None:
                return kept
        if judged:
            from offload_fixer import xla

            # started at the first compilation no earlier run kept: a run that reads every
            # verdict from the cache starts no compiler; this one's start-up overlaps the analysis
            xla.oracle(self.target, self.topology).spawn()
        report = analyze(lowered, target=self.target, function=function, remat_policies=policies)
        if judged:
            from offload_fixer import xla
            from offload_fixer.xla.confirm import confirm

            report = confirm(report, lowered, xla.oracle(self.target, self.topology))
        if self.verdicts is not None and key is not None and jax_distributed.is_first_process():
            self.verdicts.put(key, report)  # once, where several processes check the same module
        return report

    def check_eager(
        self, fun: Any, args_flat: Sequence[Any], out_flat: Sequence[Any], lower: Callable[[str], Any]
    ) -> None:
        """One of JAX's own jits (an eager ``jnp``/``lax`` operation) that took or returned an
        array in host memory: analysed like a user's jit, reported at the user's line."""
        from offload_fixer.jax_compat import tracing as jax_tracing

        if not self.active or not self.outside_any_trace() or not _is_jax_internal(fun):
            return
        kinds = [jax_tracing.host_memory_kind(v) for v in (*args_flat, *out_flat)]
        if not any(kinds):
            return
        where = _user_frame()
        try:
            signature = (id(getattr(fun, "__code__", fun)), tuple(_leaf_key(v) for v in args_flat), where)
            hash(signature)
        except TypeError:
            signature = None
        if not self.observe(signature):
            return
        report, _ = self._analyse_eager(fun, lower, where)
        if report is not None:
            self.record(report, where=where)

    def _analyse_eager(
        self, fun: Any, lower: Callable[[str], Any], where: tuple[str, int, int] | None
    ) -> tuple[Report | None, Any]:
        """(the report, the lowering for the target) of an eager operation at the user's line
        ``where``; ``(None, None)`` where it could not be checked (a tool warning)."""

        name = getattr(fun, "__name__", type(fun).__name__)
        function = FunctionRef(f"{name}{EAGER_SUFFIX}", where[0] if where else None, where[1] if where else None)
        with self._lock:
            try:
                lowered = lower(self.platform)
                report = self.report(lowered, function)
            except Exception as exc:  # noqa: BLE001 - the tool must never break the program
                self.warn(f"could not check the eager {name} for {self.target}: {_one_line(exc)}")
                return None, None
            return report, lowered

    def intercept_eager(
        self, fun: Any, args_flat: Sequence[Any], lower: Callable[[str], Any], proceed: Callable[[], Sequence[Any]]
    ) -> Sequence[Any]:
        """On the accelerator: one of JAX's own jits on an array in host memory, checked before
        it compiles and guarded as a jit is (a failure patched, or the program stopped)."""
        from offload_fixer.accelerator import Compilation, Route
        from offload_fixer.jax_compat import tracing as jax_tracing

        run = self.accelerator
        if run is None or not self.active or not self.outside_any_trace() or not _is_jax_internal(fun):
            return proceed()
        if not any(jax_tracing.host_memory_kind(v) for v in args_flat):
            return proceed()
        where = _user_frame()
        try:
            signature = (id(getattr(fun, "__code__", fun)), tuple(_leaf_key(v) for v in args_flat), where)
            hash(signature)
        except TypeError:
            return proceed()
        route = self._eager_routes.get(signature)
        if route is not None:
            return route.call(proceed, lambda patched: patched.call_flat(args_flat))
        if not self.observe(signature):
            return proceed()
        report, lowered = self._analyse_eager(fun, lower, where)
        name = f"{getattr(fun, '__name__', type(fun).__name__)}{EAGER_SUFFIX}"
        compilation = Compilation(name, where, report, lowered, lambda: lower(run.local_platform), eager=True)
        route = self._eager_routes[signature] = Route(compilation)
        try:
            return route.first_call(run, proceed, lambda patched: patched.call_flat(args_flat), lambda: None)
        finally:
            if report is not None:
                self.record(report, where=where)

    def warn(self, message: str) -> None:
        with self._lock:
            if message not in self.result.tool_warnings:
                self.result.tool_warnings.append(message)

    def _add(self, report: Report, call: AbstractCall | None = None) -> None:
        key = report_key(report)
        if key in self._report_keys:
            return
        self._report_keys.add(key)
        if call is not None:
            self.result.calls[len(self.result.reports)] = call
        self.result.reports.append(report)
        for path in report_paths(report):
            if path not in self.result.sources:
                data = read_source_bytes(path)
                if data is not None:
                    self.result.sources[path] = hashlib.sha256(data).hexdigest()
                    self.result.texts[path] = data.decode("utf-8", "replace")


def report_key(report: Report) -> Any:
    """What makes two reports one: the function and its diagnostics (a recompilation, or the
    same compilation in another process, that finds the same)."""
    key: Any = (report.function, report.diagnostics)
    try:
        hash(key)
    except TypeError:
        key = json.dumps(report.to_dict(), sort_keys=True, default=str)
    return key


class CheckedJit:
    """Stands in for a ``jax.jit`` result: same behaviour, plus a check per new signature."""

    def __init__(
        self,
        real: Any,
        fun: Any,
        options: Any,
        static: tuple[tuple[int, ...], tuple[str, ...]],
        checker: CompilationChecker,
        site: tuple[str, int, int] | None = None,
        donates: bool = False,
    ):
        vars(self).update(
            _site=site,
            _donates=donates,
            _real=real,
            _fun=fun,
            _identity=checker.identity(fun, options),
            _static_nums=static[0],
            _static_names=static[1],
            _checker=checker,
            _routes={},
        )
        for name in ("__name__", "__qualname__", "__doc__", "__module__"):
            value = getattr(real, name, None)
            if value is not None:
                vars(self)[name] = value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        checker = self._checker  # the fast path of _intercept, inlined: this runs every step
        if not checker.active or not checker.outside_any_trace():
            return self._real(*args, **kwargs)
        if checker.accelerator is not None:
            return self._on_accelerator(args, kwargs, lowering=False)
        if not checker.observe(self._signature(args, kwargs)):
            return self._real(*args, **kwargs)
        return self._run_then_check(self._real, args, kwargs)

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        checker = self._checker
        if checker.accelerator is not None and checker.active and checker.outside_any_trace():
            return self._on_accelerator(args, kwargs, lowering=True)
        return self._intercept(self._real.lower, args, kwargs)

    def trace(self, *args: Any, **kwargs: Any) -> Any:
        return self._intercept(self._real.trace, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        real = vars(self).get("_real")
        if real is None:
            raise AttributeError(name)
        return getattr(real, name)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        return self if instance is None else types.MethodType(self, instance)

    def __repr__(self) -> str:
        return repr(self._real)

    def _intercept(self, operation: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        checker = self._checker
        if not checker.active or not checker.outside_any_trace():
            return operation(*args, **kwargs)
        if not checker.observe(self._signature(args, kwargs)):
            return operation(*args, **kwargs)
        return self._run_then_check(operation, args, kwargs)

    def _on_accelerator(self, args: tuple, kwargs: dict, lowering: bool) -> Any:
        """A call (or ``.lower``) where the local backend is the accelerator: a new signature is
        checked before the program compiles it, then guarded (:mod:`offload_fixer.accelerator`);
        a later one runs as its first did, patched where that failed."""
        from offload_fixer.accelerator import AcceleratedLowered

        checker = self._checker
        run = checker.accelerator
        assert run is not None
        signature = self._signature(args, kwargs)
        first = checker.observe(signature)
        route = self._routes.get(signature) if signature is not None else None
        if route is None and first:
            route = self._routes[signature] = self._route(args, kwargs)
        if lowering:
            real = self._real.lower(*args, **kwargs)
            return AcceleratedLowered(real, run, route.compilation, route.patched) if route is not None else real
        if route is None:
            return self._real(*args, **kwargs)
        dynamic_args, dynamic_kwargs = self._dynamic(args, kwargs)

        def call() -> Any:
            return self._real(*args, **kwargs)

        def patched_call(patched: Any) -> Any:
            return patched(*dynamic_args, **dynamic_kwargs)

        if first:  # measured from its lowering by shapes: a donated argument is gone after the call
            return route.first_call(run, call, patched_call, lambda: route.compilation.local_lowering().compile())
        return route.call(call, patched_call)

    def _route(self, args: tuple, kwargs: dict) -> Route:
        """The check of a new signature (recorded), and the route its calls take."""
        from offload_fixer.accelerator import Compilation, Route

        checker = self._checker
        report, lowered = checker.analyse(self._real, self._fun, args, kwargs, site=self._site)
        if report is not None:
            checker.record(report, checker.call_of(report, self._real, self._fun, args, kwargs))
        abstract = _abstract(args, kwargs)
        return Route(
            Compilation(
                _describe(self._fun),
                _user_frame(),
                report,
                lowered,
                lambda: self._real.trace(*abstract[0], **abstract[1]).lower(),
            )
        )

    def _dynamic(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """The arguments without the static ones: what a compiled program is called with."""
        if not (self._static_nums or self._static_names):
            return args, kwargs
        positions = {i if i >= 0 else i + len(args) for i in self._static_nums}
        return (
            tuple(a for i, a in enumerate(args) if i not in positions),
            {k: v for k, v in kwargs.items() if k not in self._static_names},
        )

    def _run_then_check(self, operation: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """The user's operation first (its result and errors are the program's), then the
        check, which reuses JAX's cached trace. A call under a pod (``--topology``) is
        checked first: where it would run on the pod's compile-only devices, it is refused
        before JAX compiles it for them only to fail executing it."""
        checker = self._checker
        if checker.pod is not None and operation is self._real:
            lowered = checker.check(self._real, self._fun, args, kwargs, site=self._site)
            if lowered is not None and checker.pod.runs_on_pod(lowered):
                raise checker.pod.refusal(f"calling {_describe(self._fun)}")
            return operation(*args, **kwargs)
        if self._donates and operation is self._real:
            aborts = _donation_abort(lambda: self._real.lower(*args, **kwargs))
            if aborts is not None:
                checker.check(self._real, self._fun, args, kwargs, site=self._site)
                raise WouldAbort(f"calling {_describe(self._fun)} would abort the process: {aborts}")
        try:
            result = operation(*args, **kwargs)
        except Exception as exc:
            self._checker.check(
                self._real, self._fun, args, kwargs, failure=exc, site=self._site, called_at=_user_frame()
            )
            raise
        # a pod program's own .lower() is already the pod's TPU lowering: not lowered twice
        on_pod = checker.pod is not None and operation == self._real.lower and checker.pod.runs_on_pod(result)
        self._checker.check(self._real, self._fun, args, kwargs, site=self._site, lowered=result if on_pod else None)
        if self._donates and operation == self._real.lower and not on_pod:
            aborts = _donation_abort(lambda: result)
            if aborts is not None:
                return AbortingLowered(
                    result, f"calling the compiled {_describe(self._fun)} would abort the process: {aborts}"
                )
        return result

    def _signature(self, args: tuple, kwargs: dict) -> Any:
        """What makes a compilation distinct; ``None`` inside a trace (tracer arguments)."""
        checker = self._checker
        static: tuple = ()
        try:
            if self._static_nums or self._static_names:
                positions = {i if i >= 0 else i + len(args) for i in self._static_nums}
                static = tuple((i, _hashable(args[i])) for i in sorted(positions) if 0 <= i < len(args))
                static += tuple((k, _hashable(kwargs[k])) for k in sorted(kwargs) if k in self._static_names)
                args = tuple(a for i, a in enumerate(args) if i not in positions)
                kwargs = {k: v for k, v in kwargs.items() if k not in self._static_names}
            leaves, treedef = checker.tree_flatten((args, kwargs))
            leaf_keys = tuple(map(checker.leaf_signature, leaves))
        except _TracerArgument:
            return None
        except Exception as exc:  # noqa: BLE001 - an argument the tool does not understand: JAX will say more
            checker.warn(f"could not compute the signature of a call to {_describe(self._fun)}: {_one_line(exc)}")
            return None
        return (self._identity, treedef, leaf_keys, static)


def _donation_abort(lower: Callable[[], Any]) -> str | None:
    """Why calling what ``lower`` lowers would abort the process (a donated host buffer given
    to a device output), ``None`` where it would not or cannot be lowered: JAX says why then."""
    from offload_fixer.ir.module import load

    try:
        return load(lower()).donation_abort()
    except Exception:  # noqa: BLE001 - an unreadable module, or a lowering the program's own call fails again, in its words
        return None


class AbortingLowered:
    """The program's own ``Lowered`` of a call that would abort the process: compiles as it
    would, and its compiled program stops the program instead of being called."""

    def __init__(self, real: Any, why: str) -> None:
        vars(self).update(_real=real, _why=why)

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        return AbortingCompiled(self._real.compile(*args, **kwargs), self._why)

    def __getattr__(self, name: str) -> Any:
        return getattr(vars(self)["_real"], name)


class AbortingCompiled:
    """A compiled program whose call would abort the process (:class:`AbortingLowered`)."""

    def __init__(self, real: Any, why: str) -> None:
        vars(self).update(_real=real, _why=why)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise WouldAbort(self._why)

    def __getattr__(self, name: str) -> Any:
        return getattr(vars(self)["_real"], name)


class _TracerArgument(Exception):
    """A tracer argument: the call is part of an enclosing trace, not a compilation."""


class LeafSignatures:
    """The abstract signature of one argument leaf, as jit's cache distinguishes it.

    How to read a type is decided once per type: ``isinstance(x, jax.Array)`` is an ABC check,
    too slow to repeat on every call of a jitted function.
    """

    def __init__(self) -> None:
        import jax
        import numpy as np

        from offload_fixer.jax_compat import tracing as jax_tracing

        self._classes = (
            (jax_tracing.tracer_class(), _tracer_signature),
            (jax.Array, _array_signature),
            (jax.ShapeDtypeStruct, _abstract_signature),
            ((np.ndarray, np.generic), _numpy_signature),
        )
        self._by_type: dict[type, Callable[[Any], Any]] = {t: type for t in (bool, int, float, complex)}

    def __call__(self, leaf: Any) -> Any:
        kind = type(leaf)
        reader = self._by_type.get(kind)
        if reader is None:
            reader = next(
                (r for classes, r in self._classes if issubclass(kind, classes)),
                _other_signature,
            )
            self._by_type[kind] = reader
        return reader(leaf)


def _abstract(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The arguments as shapes, types and shardings (``jax.ShapeDtypeStruct``), so that what
    lowers a call again later holds no array alive."""
    import jax

    def abstract(leaf: Any) -> Any:
        if isinstance(leaf, jax.Array):
            return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=leaf.sharding, weak_type=leaf.weak_type)
        return leaf

    return jax.tree_util.tree_map(abstract, (args, kwargs))


def _leaf_key(value: Any) -> Any:
    aval = getattr(value, "aval", None)
    return (type(value), aval, getattr(value, "sharding", None)) if aval is not None else (type(value), value)


def _user_frame() -> tuple[str, int, int] | None:
    """``(path, line, column)`` of the innermost frame of the user's program on the stack."""
    frame: types.FrameType | None = sys._getframe(1)
    ours = (os.path.dirname(os.path.abspath(__file__)) + os.sep, *jax_roots())
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(ours) and path not in TOOL_FRAMES and not frame.f_code.co_filename.startswith("<"):
            column = 1
            positions = getattr(frame.f_code, "co_positions", None)
            if positions is not None:
                found = list(positions())[frame.f_lasti // 2] if frame.f_lasti >= 0 else None
                if found and found[2] is not None:
                    column = found[2] + 1
            return path, frame.f_lineno, column
        frame = frame.f_back
    return None


def _at_user_line(report: Report, where: tuple[str, int, int] | None) -> Report:
    """An eager operation's findings point where the user wrote it (its trace has no frame
    of the user's own otherwise)."""
    import dataclasses

    if where is None:
        return report
    span = Span(where[0], where[1], where[2])
    diagnostics = tuple(
        d if d.location is not None and d.location.path == where[0] else dataclasses.replace(d, span=span)
        for d in report.diagnostics
    )
    return dataclasses.replace(report, diagnostics=diagnostics)


def _tracer_signature(leaf: Any) -> Any:
    raise _TracerArgument


def _array_signature(leaf: Any) -> Any:
    return ("array", leaf.aval, leaf.sharding if leaf.committed else None)


def _abstract_signature(leaf: Any) -> Any:
    return (
        "abstract",
        leaf.shape,
        leaf.dtype,
        leaf.weak_type,
        _hashable(leaf.sharding),
    )


def _numpy_signature(leaf: Any) -> Any:
    return ("numpy", leaf.shape, leaf.dtype)


def _other_signature(leaf: Any) -> Any:
    return ("other", type(leaf))


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return ("unhashable", id(value), type(value).__name__)
    return value


def _freeze_options(args: tuple, kwargs: dict) -> Any:
    """jit options (shardings pytrees, static/donated argnums...) as a hashable key."""
    import jax

    frozen = []
    for name, value in [(i, v) for i, v in enumerate(args)] + sorted(kwargs.items(), key=lambda kv: str(kv[0])):
        leaves, treedef = jax.tree_util.tree_flatten(value)
        frozen.append((name, treedef, tuple(_hashable(leaf) for leaf in leaves)))
    return tuple(frozen)


def _static_arguments(fun: Any, options: dict) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Static positions and names, each inferred from the other as ``jax.jit`` does."""
    import inspect

    nums = _as_tuple(options.get("static_argnums"))
    names = tuple(str(n) for n in _as_tuple(options.get("static_argnames")))
    try:
        parameters = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return nums, names
    positional = [
        p for p in parameters if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    nums += tuple(i for i, p in enumerate(positional) if p.name in names and i not in nums)
    for i in nums:
        if -len(positional) <= i < len(positional) and positional[i].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
            names += (positional[i].name,)
    return nums, names


def _as_tuple(value: Any) -> tuple:
    if value is None:
        return ()
    if isinstance(value, (int, str)):
        return (value,)
    return tuple(value)


def _is_jax_internal(fun: Any) -> bool:
    from offload_fixer.api import python_function

    code = getattr(python_function(fun), "__code__", None)
    return code is not None and os.path.abspath(code.co_filename).startswith(jax_roots())


def _jitted_at(function: FunctionRef | None, site: tuple[str, int, int] | None) -> FunctionRef | None:
    """``function`` with the jit site ``run`` saw, where that is another file than its ``def``."""
    if function is None or site is None or not function.path or os.path.abspath(function.path) == site[0]:
        return function
    return replace(function, jit_path=site[0], jit_line=site[1])


def _called_from_jax() -> bool:
    """JAX calling the public ``jax.jit`` on its own behalf (two frames up: past ``jit``)."""
    return os.path.abspath(sys._getframe(2).f_code.co_filename).startswith(jax_roots())


def _checked_jit(real_jit: Callable[..., Any], checker: CompilationChecker) -> Callable[..., Any]:
    from offload_fixer.api import is_jitted

    @functools.wraps(real_jit)
    def jit(*args: Any, **kwargs: Any) -> Any:
        result = real_jit(*args, **kwargs)
        if _called_from_jax():
            return result
        if not is_jitted(result):
            if not callable(result):
                return result

            @functools.wraps(result)
            def decorate(
                fun: Any,
            ) -> Any:  # ``jax.jit(static_argnums=...)`` used as a decorator
                inner = result(fun)
                return inner if isinstance(inner, CheckedJit) else wrap(inner, fun, (), kwargs)

            return decorate
        fun = args[0] if args else kwargs.get("fun")
        options = {k: v for k, v in kwargs.items() if k != "fun"}
        return wrap(result, fun, args[1:], options)

    def wrap(real: Any, fun: Any, positional: tuple, options: dict) -> Any:
        if not checker.active or _is_jax_internal(fun):
            return real
        return CheckedJit(
            real,
            fun,
            _freeze_options(positional, options),
            _static_arguments(fun, options),
            checker,
            _user_frame(),
            donates=bool(options.get("donate_argnums") or options.get("donate_argnames")),
        )

    return jit


@contextmanager
def intercept_jit(checker: CompilationChecker) -> Iterator[CompilationChecker]:
    """Route ``jax.jit`` (and ``from jax import jit`` done inside the block) through ``checker``.

    Only the public name is replaced: JAX's own modules keep the real ``jit`` (``jax.eval_shape``
    jits the user's function internally, and that is not a compilation).
    """
    import jax

    real_jit = jax.jit
    jax.jit = _checked_jit(real_jit, checker)
    try:
        yield checker
    finally:
        checker.active = False
        jax.jit = real_jit


def _describe(fun: Any) -> str:
    return f"jit({getattr(fun, '__name__', type(fun).__name__)})"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
