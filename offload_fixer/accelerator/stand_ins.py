"""The stand-ins through which the program meets its compilations on the accelerator: each
call of a jit's signature routed as its first call went (patched where that failed), a
``Lowered`` whose ``.compile()`` is guarded, and the calls ``run --fix`` times."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from offload_fixer.accelerator.guard import AcceleratorRun, Compilation, StepFigures
    from offload_fixer.accelerator.patched import Patched

T = TypeVar("T")


def timed(figures: StepFigures | None, call: Callable[[], T]) -> T:
    """``call()``, its time added to ``figures`` (waited for) where the run measures it."""
    if figures is None:
        return call()
    import jax

    start = time.perf_counter()
    result = call()
    jax.block_until_ready(result)
    figures.times.append(time.perf_counter() - start)
    return result


class Route:
    """How one compilation (a jit's signature, an eager operation at a line) runs on the
    accelerator once guarded: as the program has it, or patched; timed where measured."""

    def __init__(self, compilation: Compilation) -> None:
        self.compilation = compilation
        self.patched: list[Patched] = []
        """The patched compilation, once the program's own failed."""
        self.figures: StepFigures | None = None

    def keep(self, patched: Patched, run: AcceleratorRun) -> Patched:
        """``patched`` is what this compilation's calls run from now on (measured from here)."""
        self.patched.append(patched)
        self.figures = run.measuring(self.compilation, True, patched.memory)
        return patched

    def first_call(
        self,
        run: AcceleratorRun,
        real: Callable[[], T],
        patched_call: Callable[[Patched], T],
        memory: Callable[[], Any],
    ) -> T:
        """The first call of the compilation: guarded, its figures started where measured."""

        def attempt() -> T:
            result = real()
            if run.measures(self.compilation):
                self.figures = run.measuring(self.compilation, False, run.compiled_memory(self.compilation, memory))
            return result

        return run.guard(self.compilation, attempt, lambda patched: patched_call(self.keep(patched, run)))

    def call(self, real: Callable[[], T], patched_call: Callable[[Patched], T]) -> T:
        """A later call: the patched compilation where the program's failed, timed where measured."""
        if self.patched:
            return timed(self.figures, lambda: patched_call(self.patched[0]))
        return timed(self.figures, real)


class AcceleratedLowered:
    """Stands in for a ``jax.stages.Lowered`` on the accelerator: ``.compile()`` is guarded
    (a failure recorded, the patched compilation returned instead) and, where the run
    measures it, the compiled program's calls timed. Anything else is the real one's."""

    def __init__(self, real: Any, run: AcceleratorRun, compilation: Compilation, patched: list[Patched]) -> None:
        vars(self).update(_real=real, _run=run, _compilation=compilation, _patched=patched)

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        run, compilation, real = self._run, self._compilation, self._real
        if self._patched:  # this compilation failed before: its patch is what runs
            return _TimedCompiled(self._patched[0], run.measuring(compilation, True, self._patched[0].memory))

        def recover(patched: Patched) -> Any:
            self._patched.append(patched)
            return _TimedCompiled(patched, run.measuring(compilation, True, patched.memory))

        compiled = run.guard(compilation, lambda: real.compile(*args, **kwargs), recover)
        if isinstance(compiled, _TimedCompiled):
            return compiled
        if not run.measures(compilation):
            return compiled
        return _TimedCompiled(
            compiled, run.measuring(compilation, False, run.compiled_memory(compilation, lambda: compiled))
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(vars(self)["_real"], name)


class _TimedCompiled:
    """A compiled program (real or patched) whose calls are timed where the run measures it."""

    def __init__(self, compiled: Any, figures: StepFigures | None) -> None:
        vars(self).update(_compiled=compiled, _figures=figures)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return timed(self._figures, lambda: self._compiled(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(vars(self)["_compiled"], name)
