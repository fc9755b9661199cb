"""``run`` where the local backend is the accelerator (:mod:`offload_fixer.accelerator`): the
run's words about what failed and was patched, and ``run --fix`` running the fixed program
again there, with each fixed compilation's step time and HBM before and after."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from offload_fixer.cli.options import Console, Invocation, Outcome, fail
from offload_fixer.exit_codes import ExitCode

if TYPE_CHECKING:
    from offload_fixer.model import StepMeasurement


def accelerator_run(invocation: Invocation, target: str, keep_going: bool, console: Console, measure: bool) -> Any:
    """The accelerator path of this run (an ``AcceleratorRun``), or ``None`` on the CPU.
    ``measure``: time and measure every compilation with findings (``--fix``: the figures
    before the fix)."""
    from offload_fixer.accelerator import AcceleratorRun, detect
    from offload_fixer.jax_compat import tracing

    tracing.start_quietly(verbose=invocation.verbose)  # JAX's hardware probes import JAX: quietly, here
    try:
        accelerator = detect()
    except ValueError as exc:
        fail(ExitCode.USAGE, str(exc), console)
    if accelerator is None:
        return None
    return AcceleratorRun(
        accelerator,
        target,
        keep_going=keep_going,
        say=lambda text: console.note(text, always=True),
        verbose=invocation.verbose,
        measure=(lambda compilation: compilation.report is not None and bool(compilation.report.diagnostics))
        if measure
        else None,
    )


def report_failures(result: Any, console: Console, outcome: Outcome, differences: bool = True) -> None:
    """After the program: what failed on the accelerator and was patched, or where the
    program was stopped; a prediction the accelerator did not bear out is an error
    (``differences``: said here, not by ``--confirm``'s own report)."""
    run = result.accelerator
    if run is None:
        return
    for report in result.reports if differences else ():
        for difference in report.unpredicted:
            name = report.function.name if report.function else report.module_name
            console.note(console.styled_error(f"offload-fixer: {name}: {difference}"), always=True)
            outcome.failure = outcome.failure or ExitCode.FINDINGS
    patched = [failure for failure in run.failures if failure.patched]
    if patched:
        count = len(patched)
        console.note(
            f"offload-fixer: {count} compilation{'s' if count != 1 else ''} failed on {result.target} and "
            f"{'were' if count != 1 else 'was'} patched to keep the program going; what it printed after "
            f"{patched[0].name} at {patched[0].where} came from patched compilations",
            always=True,
        )
    if result.stopped is not None:
        console.note(f"offload-fixer: the program was stopped: {result.stopped.reason}", always=True)


def forget_program_modules(before: set[str], root: str) -> None:
    """Drop from ``sys.modules`` what the program imported from inside ``root`` (its project),
    so that running it again imports its fixed files afresh."""
    root = os.path.realpath(root) + os.sep
    for name in [name for name in sys.modules if name not in before]:
        path = getattr(sys.modules[name], "__file__", None)
        if path and os.path.realpath(path).startswith(root) and "site-packages" not in path:
            del sys.modules[name]


@dataclass(frozen=True)
class FixedRun:
    """What running the fixed program again on the accelerator showed, for the fixes' records
    (``model.MeasuredFix.held`` and ``steps``)."""

    held: bool
    steps: tuple[StepMeasurement, ...]
    """Each fixed compilation's figures, before and after."""
    reverted: frozenset[str] = frozenset()
    """The files put back to their bytes before the fix (``--confirm``, a fix that did not hold)."""

    def steps_of(self, plan: Any) -> tuple[StepMeasurement, ...]:
        """The figures of the compilations of the functions whose findings ``plan`` fixes."""
        functions = {_key((d.function.name, d.function.path)) for d in plan.covered if d.function is not None}
        return tuple(step for step in self.steps if _key((step.function, step.path)) in functions)


def run_fixed_again(
    first: Any,
    rerun: Callable[[Any], Any],
    written: Sequence[Any],
    console: Console,
    revert: bool,
) -> FixedRun:
    """``run --fix`` on the accelerator: the fixed program run again there (``rerun(run)``
    with a fresh ``AcceleratorRun``), whether the fix held (each fixed function compiled and
    its errors are gone, and the program ended well), and each fixed compilation's step time
    and HBM before and after. ``revert``: a fix that did not hold is undone (``--confirm``:
    the chip's compiler is the judge)."""
    from offload_fixer.accelerator import AcceleratorRun

    before = first.accelerator
    fixed = {
        _key((d.function.name, d.function.path))
        for result in written
        for plan in result.applied
        for d in plan.covered
        if d.function is not None
    }
    console.note(f"offload-fixer: running the fixed program again on {before.accelerator.device}", always=True)
    again = AcceleratorRun(
        before.accelerator,
        first.target,
        keep_going=True,
        say=lambda text: console.note(text, always=True),
        measure=lambda compilation: _key(compilation.function) in fixed,
    )
    second = rerun(again)
    why = []
    failing = [failure.name for failure in again.failures if _key(failure.function) in fixed]
    if failing:
        why.append(f"{', '.join(failing)} still fail{'s' if len(failing) == 1 else ''} to compile")
    still = [
        f"{report.function.name}: {d.code}"
        for report in second.reports
        if report.function is not None and _key((report.function.name, report.function.path)) in fixed
        for d in report.diagnostics
        if d.severity == "error"
    ]
    if still:
        why.append(f"errors remain ({', '.join(dict.fromkeys(still))})")
    if second.stopped is not None:
        why.append(f"the program was stopped: {second.stopped.reason}")
    elif second.program_exit_code not in (0, None):
        why.append(f"the program exited {second.program_exit_code}")
    held = not why
    if held:
        console.note(
            "offload-fixer: the fix held: every fixed compilation compiled and the program ended well", always=True
        )
    else:
        console.note(console.styled_error(f"offload-fixer: the fix did not hold: {'; '.join(why)}"), always=True)
    unfixed = [failure.name for failure in again.failures if _key(failure.function) not in fixed]
    if unfixed:
        console.note(f"offload-fixer: still failing, with no fix written: {', '.join(unfixed)}", always=True)
    measured = [figures for figures in before.measured if _key(figures.function) in fixed]
    steps = step_measurements(measured, again.measured, before.accelerator.device)
    for step in steps:
        console.note(f"offload-fixer:   {step.summary}", always=True)
    reverted = _revert(written, console) if not held and revert else frozenset()
    return FixedRun(held, steps, reverted)


def _key(function: tuple[str, str | None]) -> tuple[str, str | None]:
    name, path = function
    return name, os.path.realpath(path) if path else None


def step_measurements(before: Sequence[Any], after: Sequence[Any], device: str) -> tuple[StepMeasurement, ...]:
    """One record per fixed compilation: its step time and HBM (the compiler's memory analysis)
    before the fix (the compilation as the first run ran it: patched where it failed) and
    after, the compilation with the most calls where a function has several."""
    from offload_fixer.model import StepMeasurement

    def busiest(figures: Sequence[Any]) -> dict[tuple[str, str | None], Any]:
        chosen: dict[tuple[str, str | None], Any] = {}
        for f in figures:
            key = _key(f.function)
            if key not in chosen or len(f.times) > len(chosen[key].times):
                chosen[key] = f
        return chosen

    def ms(figures: Any) -> float | None:
        return None if figures is None or figures.step_s is None else figures.step_s * 1000

    old, new = busiest(before), busiest(after)
    steps = []
    for key, first in old.items():
        second = new.get(key)
        name, path = first.function
        steps.append(
            StepMeasurement(
                first.name,
                name,
                path,
                device,
                step_before_ms=ms(first),
                step_after_ms=ms(second),
                calls_before=len(first.times),
                calls_after=len(second.times) if second else 0,
                before=first.memory,
                after=second.memory if second else None,
                before_patched=first.patched,
            )
        )
    return tuple(steps)


def _revert(written: Sequence[Any], console: Console) -> frozenset[str]:
    """Each written file back to the bytes it held before the fix; the paths put back."""
    from offload_fixer.fixes.errors import FixError
    from offload_fixer.fixes.writing import write_source
    from offload_fixer.report import display_path

    reverted = set()
    for result in written:
        try:
            write_source(result.path, result.new_data, result.old_data)
        except FixError as exc:
            console.note(console.styled_error(f"offload-fixer: {display_path(result.path)}: not reverted: {exc}"))
            continue
        reverted.add(result.path)
        console.note(f"offload-fixer: {display_path(result.path)}: reverted (the chip's compiler is the judge)")
    return frozenset(reverted)
