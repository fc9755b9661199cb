"""The guard of each compilation on the accelerator: the program's own compile tried (the
released compiler's first where the accelerator is emulated), a host-offload failure recorded
in the compiler's words, then the compilation patched or the program stopped; and what a run
there records (its failures, the verdicts, the figures ``run --fix`` measures)."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from offload_fixer.xla_messages import summary

if TYPE_CHECKING:
    from offload_fixer.accelerator.patched import Patched
    from offload_fixer.model import MemoryFigures, Report, XlaVerdict

EMULATE_ENV = "OFFLOAD_FIXER_EMULATE_ACCELERATOR"
"""``tpu`` (or ``gpu``): take the accelerator path on this machine's CPU, the target's released
compiler judging each compilation first (CI, the tests, trying the path without a chip)."""
XLA_ERRORS = ("JaxRuntimeError", "XlaRuntimeError")
"""How a failed compile reaches Python (``XlaRuntimeError`` before JAX 0.4.36)."""

T = TypeVar("T")


@dataclass(frozen=True)
class Accelerator:
    """The accelerator the program's compilations are judged by."""

    platform: str
    """``tpu`` or ``gpu``."""
    emulated: bool = False
    """The released compiler judges, compile-only, before the program compiles on the CPU."""

    @property
    def compiler(self) -> str:
        """``libtpu 0.0.42.1``: the compiler of this platform installed here (the chip's own
        compiler is the one JAX loaded)."""
        from offload_fixer.xla import compilers

        installed = compilers.installed(self.platform)
        return str(installed) if installed is not None else self.platform

    @property
    def device(self) -> str:
        """``TPU v5 lite``, or what judges in its place."""
        if self.emulated:
            return f"{self.platform} (emulated: {self.compiler}, compile-only)"
        import jax

        return str(jax.devices()[0].device_kind)


def detect() -> Accelerator | None:
    """The accelerator the program will compile for here, or ``None`` (the CPU): the emulated
    one :data:`EMULATE_ENV` names, else the one JAX finds (``JAX_PLATFORMS`` first)."""
    emulated = os.environ.get(EMULATE_ENV, "").strip().lower()
    if emulated:
        if emulated not in ("tpu", "gpu"):
            raise ValueError(f"{EMULATE_ENV}={emulated!r}: expected tpu or gpu")
        return Accelerator(emulated, emulated=True)
    from offload_fixer.jax_compat import tracing

    platform = tracing.accelerator_platform()
    return Accelerator(platform) if platform is not None else None


# ---------------------------------------------------------------------------------------
# What a run on the accelerator records
@dataclass
class Failure:
    """A compilation the accelerator did not compile (or, predicted to abort, was not given)."""

    name: str
    """``jit(train_step)``, ``slice (eager)``."""
    function: tuple[str, str | None]
    """The function compiled, as its findings name it: (name, path)."""
    where: str
    """Where the program compiled it: ``examples/train.py:90``."""
    message: str
    """The compiler's error as it raised it (code, text and link kept)."""
    verdict: XlaVerdict
    predicted: bool
    """The analysis predicted this failure before the compile."""
    patched: bool = False
    """The program went on with the compilation compiled without its offload."""
    traceback: str = ""
    """JAX's traceback of the failure, shown with ``-v``."""


@dataclass
class StepFigures:
    """One compilation's calls timed and its memory read, as ``run --fix`` measures it on the
    accelerator (before the fix: the patched compilation; after: the fixed program's)."""

    name: str
    """``jit(train_step)``."""
    function: tuple[str, str | None]
    """The function compiled, as its findings name it: (name, path)."""
    patched: bool
    times: list[float] = field(default_factory=list)
    """Seconds per call after the one that compiled, each waited for (``block_until_ready``)."""
    memory: MemoryFigures | None = None
    """The compiler's memory analysis of what ran (not the allocator's peak)."""

    @property
    def step_s(self) -> float | None:
        """The median call, ``None`` where no call was timed."""
        return statistics.median(self.times) if self.times else None


class StopProgram(BaseException):
    """Ends the program at a compilation that fails: ``--no-keep-going``, or no patched
    compilation could be built. A ``BaseException``: the program's own ``except Exception``
    does not swallow it."""

    def __init__(self, failure: Failure, reason: str) -> None:
        super().__init__(reason)
        self.failure = failure
        self.reason = reason


# ---------------------------------------------------------------------------------------
# One compilation, guarded
@dataclass
class Compilation:
    """What the guard knows of one compilation before the program compiles it."""

    name: str
    where: tuple[str, int, int] | None
    report: Report | None
    """The analysis of its lowering for the target (``None``: it could not be checked)."""
    target_lowering: Any
    """That lowering (``None`` where it could not be lowered): what the emulated compiler judges."""
    local_lowering: Callable[[], Any]
    """The program's own lowering for the local backend: what the patch recompiles."""
    eager: bool = False
    """One of JAX's own jits (an eager operation): never timed, it is no step."""

    @property
    def function(self) -> tuple[str, str | None]:
        """(name, path) of the function compiled, as its findings name it."""
        ref = self.report.function if self.report is not None else None
        return (ref.name, ref.path) if ref is not None else (self.name, None)


class AcceleratorRun:
    """The accelerator path of one run: guards each compilation, patches the failing ones."""

    def __init__(
        self,
        accelerator: Accelerator,
        target: str,
        keep_going: bool = True,
        say: Callable[[str], None] | None = None,
        verbose: bool = False,
        measure: Callable[[Compilation], bool] | None = None,
    ) -> None:
        self.accelerator = accelerator
        self.target = target
        self.keep_going = keep_going
        self.say = say or _to_stderr
        self.verbose = verbose
        self.measure = measure
        """Which compilations to time and measure (``run --fix``), ``None``: none."""
        self.failures: list[Failure] = []
        self.measured: list[StepFigures] = []
        self.verdicts: dict[int, XlaVerdict] = {}
        """By ``id`` of a compilation's report: the accelerator's verdict on it (compiled, or
        its rejection), where the program compiled it."""

    @property
    def local_platform(self) -> str:
        """What the program's own lowering is for: the accelerator, or the CPU it is emulated on."""
        import jax

        return jax.default_backend()

    def guard(self, compilation: Compilation, attempt: Callable[[], T], recover: Callable[[Patched], T]) -> T:
        """``attempt()``: the program's own compile (and run) of ``compilation``. Where it fails
        with a host-offload error (or the analysis predicts an abort), the failure is recorded
        and said, then ``recover(patched)`` gives the result from the compilation patched,
        unless ``--no-keep-going`` (:class:`StopProgram`)."""
        report = compilation.report
        predicted = report is not None and report.predicted is not None and report.predicted.outcome != "compiled"
        error: BaseException | None = None
        if report is not None and report.predicted is not None and report.predicted.outcome == "aborted":
            verdict = self._predicted_abort(report)
        else:
            try:
                if self.accelerator.emulated:
                    self._compile_first(compilation.target_lowering)
                result = attempt()
            except _Aborted as exc:
                verdict = exc.verdict
            except RuntimeError as exc:
                found = self._offload_failure(exc, report)
                if found is None:
                    raise  # the program's own error, not the offload's
                verdict, error = found, exc
            else:
                if report is not None:
                    self.verdicts[id(report)] = _compiled(self.target, self.accelerator.compiler)
                return result
        failure = self._failure(compilation, verdict, predicted, error)
        if report is not None:
            self.verdicts[id(report)] = failure.verdict
        self.failures.append(failure)
        self.say(
            f"offload-fixer: {failure.name} at {failure.where} does not compile for {self.target}: "
            f"{summary(failure.message)}"
        )
        if self.verbose and failure.traceback:
            self.say(failure.traceback.rstrip("\n"))
        if not self.keep_going:
            raise StopProgram(failure, "--no-keep-going stops at the first compilation that fails")
        try:
            patched = self.patch(compilation)
        except _PatchFailed as exc:
            raise StopProgram(failure, f"the program cannot go on past {failure.name}: {exc}") from None
        failure.patched = True
        how = (
            "run on device (its host operands moved there first)"
            if compilation.eager
            else "compiled without its offload (host memory made device memory)"
        )
        self.say(
            f"offload-fixer: the program goes on with {failure.name} {how}: what it prints from here on comes "
            "from a patched compilation"
        )
        return recover(patched)

    def patch(self, compilation: Compilation) -> Patched:
        """``compilation`` compiled without its offload, judged as the program's own compile
        is (the emulated compiler first, on the CPU); :class:`_PatchFailed` where that fails."""
        from offload_fixer.jax_compat import stages
        from offload_fixer.model import MemoryFigures
        from offload_fixer.xla.confirm import without_offload
        from offload_fixer.xla.oracle import module_text

        try:
            local = compilation.local_lowering()
            memory = None
            if self.accelerator.emulated:
                verdict = self._judge(without_offload(module_text(compilation.target_lowering)))
                if verdict.outcome != "compiled":
                    raise _PatchFailed(
                        f"{verdict.compiler} does not compile it without its offload either: {summary(verdict.message)}"
                    )
                memory = verdict.memory
            lowered = stages.device_memory_lowering(local, without_offload(module_text(local)))
            compiled = lowered.compile()
        except _PatchFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - a patch that cannot be built: the program stops there
            raise _PatchFailed(f"{type(exc).__name__}: {summary(str(exc))}") from None
        if memory is None:
            figures = stages.compiled_memory(compiled)
            memory = MemoryFigures(**figures) if figures else None
        from offload_fixer.accelerator.patched import Patched

        return Patched(compiled, stages.declared_memory_kinds(local), memory)

    def measures(self, compilation: Compilation) -> bool:
        """Whether this run times and measures ``compilation`` (``run --fix``; no eager one)."""
        return self.measure is not None and not compilation.eager and self.measure(compilation)

    def measuring(self, compilation: Compilation, patched: bool, memory: MemoryFigures | None) -> StepFigures | None:
        """A record of ``compilation``'s calls where this run measures it (``run --fix``)."""
        if not self.measures(compilation):
            return None
        figures = StepFigures(compilation.name, compilation.function, patched, memory=memory)
        self.measured.append(figures)
        return figures

    def compiled_memory(self, compilation: Compilation, compiled: Callable[[], Any]) -> MemoryFigures | None:
        """The memory analysis of a compilation that compiled unpatched: the emulated
        compiler's (deviceless, as on the chip), else ``compiled()``'s, the program's own."""
        from offload_fixer.jax_compat import stages
        from offload_fixer.model import MemoryFigures
        from offload_fixer.xla.oracle import module_text

        if self.accelerator.emulated:
            if compilation.target_lowering is None:
                return None
            return self._judge(module_text(compilation.target_lowering)).memory
        try:
            figures = stages.compiled_memory(compiled())
        except Exception:  # noqa: BLE001 - no figures rather than a broken program
            return None
        return MemoryFigures(**figures) if figures else None

    def judged(self, report: Report, confirm: bool = False) -> Report:
        """``report`` with what the accelerator made of its compilation: where the outcome is
        not the one the analysis predicts, the difference (:attr:`Report.unpredicted`); with
        ``confirm`` on the chip itself, the chip's verdict on each finding, as ``--confirm``
        gives the released compiler's (the chip names the first tensor it rejects; findings it
        does not speak of are left unjudged)."""
        import dataclasses

        from offload_fixer.xla.agreement import outcome_class

        verdict = self.verdicts.get(id(report))
        if verdict is None or report.predicted is None:
            return report
        tool = outcome_class(report.predicted.outcome, report.predicted.code)
        xla = outcome_class(verdict.outcome, verdict.code)
        if tool != xla:
            said = f": {summary(verdict.message)}" if verdict.message.strip() else ""
            difference = f"the analysis predicts {tool}, {verdict.compiler} on this machine says {xla}{said}"
            if difference not in report.unpredicted:
                report = dataclasses.replace(report, unpredicted=(*report.unpredicted, difference))
        if not confirm or self.accelerator.emulated:
            return report
        by = f"{verdict.compiler} on {self.accelerator.device}"
        diagnostics = tuple(_judged(d, verdict, by) for d in report.diagnostics)
        return dataclasses.replace(report, diagnostics=diagnostics, xla=verdict)

    # -- the compiler's verdicts ----------------------------------------------------------
    def _compile_first(self, target_lowering: Any) -> None:
        """The emulated accelerator's compile: the released compiler judges the lowering for
        the target, and a rejection is raised as the chip raises it."""
        if target_lowering is None:
            return
        from offload_fixer.xla.oracle import module_text

        verdict = self._judge(module_text(target_lowering))
        if verdict.outcome == "aborted":  # the chip's process would die here: said, never run
            raise _Aborted(verdict)
        if verdict.outcome == "rejected":
            import jax

            raise jax.errors.JaxRuntimeError(verdict.message)

    def _judge(self, text: str) -> XlaVerdict:
        from offload_fixer import xla

        return xla.oracle(self.accelerator.platform).judge(text)

    def _offload_failure(self, exc: BaseException, report: Report | None) -> XlaVerdict | None:
        """The verdict of a compile that raised ``exc``, where it is a host-offload failure a
        rule knows (error 1200 and the other host-offloader errors, a backend failure)."""
        if type(exc).__name__ not in XLA_ERRORS:
            return None
        from offload_fixer.xla.oracle import verdict_of_error

        predicted = report.predicted.code if report is not None and report.predicted is not None else None
        verdict = verdict_of_error(self.target, self.accelerator.compiler, str(exc), predicted)
        return verdict if verdict.code is not None else None

    def _predicted_abort(self, report: Report) -> XlaVerdict:
        from offload_fixer.model import XlaVerdict

        code = report.predicted.code if report.predicted else None
        message = (
            f"not compiled: the analysis predicts that {self.accelerator.compiler} aborts on it"
            + (f" ({code})" if code else "")
            + ", which would end the program"
        )
        return XlaVerdict(self.target, self.accelerator.compiler, "aborted", code=code, message=message)

    def _failure(
        self, compilation: Compilation, verdict: XlaVerdict, predicted: bool, exc: BaseException | None = None
    ) -> Failure:
        return Failure(
            compilation.name,
            compilation.function,
            _where(compilation.where),
            verdict.message,
            verdict,
            predicted,
            traceback=program_traceback(exc) if exc is not None else "",
        )


def _judged(diagnostic: Any, verdict: XlaVerdict, by: str) -> Any:
    """``diagnostic`` confirmed where the accelerator's rejection is its error (same code and,
    for error 1200, the tensor XLA names), refuted where the accelerator compiled it."""
    import dataclasses

    if diagnostic.severity != "error":
        return diagnostic
    if verdict.outcome == "compiled":
        return dataclasses.replace(diagnostic, confirmed=False, xla_message=None, confirmed_by=by)
    named = verdict.instruction is None or f"starting from {verdict.instruction})" in diagnostic.message
    if diagnostic.code == verdict.code and named:
        return dataclasses.replace(diagnostic, confirmed=True, xla_message=verdict.message, confirmed_by=by)
    return diagnostic


def _compiled(target: str, compiler: str) -> XlaVerdict:
    from offload_fixer.model import XlaVerdict

    return XlaVerdict(target, compiler, "compiled")


class _Aborted(Exception):
    """The emulated compiler aborted (its worker died): on the chip the program would."""

    def __init__(self, verdict: XlaVerdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


class _PatchFailed(Exception):
    """Why a failing compilation could not be compiled without its offload."""


def program_traceback(exc: BaseException) -> str:
    """The traceback JAX would have printed for ``exc``, caught where the program compiled:
    the program's frames that called the compile, then those under it, without the tool's,
    runpy's, JAX's own (which JAX hides too) or the frames that started the program."""
    import traceback

    import jax

    hidden = (
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,  # offload_fixer's
        os.path.dirname(os.path.abspath(jax.__file__)) + os.sep,
    )
    outer = traceback.extract_stack()[:-1]
    starts = [i for i, frame in enumerate(outer) if "runpy" in frame.filename]
    program = outer[starts[-1] + 1 :] if starts else outer
    frames = [
        frame
        for frame in (*program, *traceback.extract_tb(exc.__traceback__))
        if not os.path.abspath(frame.filename).startswith(hidden) and "runpy" not in frame.filename
    ]
    return (
        "Traceback (most recent call last):\n"
        + "".join(traceback.format_list(frames))
        + "".join(traceback.format_exception_only(type(exc), exc))
    )


def _where(where: tuple[str, int, int] | None) -> str:
    if where is None:
        return "an unknown line"
    from offload_fixer.report import display_path

    return f"{display_path(where[0])}:{where[1]}"


def _to_stderr(message: str) -> None:
    import sys

    print(message, file=sys.stderr, flush=True)
