"""``--confirm``: the compiler required, a report's recorded calls read back (on its pod), and the
compiler's verdicts on the run said in its own words."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from offload_fixer.cli.options import Console, Outcome, fail
from offload_fixer.exit_codes import ExitCode

if TYPE_CHECKING:
    from offload_fixer.jax_compat.pod import Pod


def saved_calls(saved: Any, console: Console) -> tuple[Pod | None, dict[int, Any]]:
    """The pod a report was made for (``run --topology``), where libtpu can build it here, and
    the report's recorded calls on its devices (``fix REPORT``). A call whose mesh names
    devices this process does not see (no libtpu for the pod, or a CPU mesh of more devices
    than this machine gives) is left out, and said: its functions' fixes are not lowered again."""
    from offload_fixer.report_file import AbstractCall, MissingDevices, decode_call
    from offload_fixer.xla import compilers

    pod = None
    if saved.topology is not None and compilers.installed("tpu") is not None:
        from offload_fixer.jax_compat.pod import PodUnavailable, start

        try:
            pod = start(saved.topology)
        except PodUnavailable as exc:
            fail(ExitCode.INPUT_ERROR, f"the report's --topology {saved.topology}: {exc}", console)
    calls: dict[int, Any] = {}
    left_out: list[str] = []
    view: AbstractContextManager[Any] = contextlib.nullcontext()
    if pod is not None:
        from offload_fixer.jax_compat.pod import pod_view

        view = pod_view(pod)
    with view:
        for index, call in saved.calls.items():
            try:
                calls[index] = AbstractCall(None, *decode_call(call))
            except MissingDevices as exc:
                left_out.append(str(exc))
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                fail(ExitCode.INPUT_ERROR, f"the report's recorded call {index} is not valid: {exc!r}", console)
    if left_out:
        where = f" (the run was made for {saved.topology}, and libtpu is not installed)" if saved.topology else ""
        console.note(
            f"offload-fixer: {len(left_out)} recorded compilation(s) not lowered again{where}: {left_out[0]}",
            always=True,
        )
    return pod, calls


def require_compiler(target: str, console: Console, why: str | None = None) -> None:
    """``--confirm`` (or what else needs it: ``why``) without the target's compiler: a clear
    refusal with the install command."""
    from offload_fixer import xla

    try:
        xla.require_installed(target)
    except xla.CompilerUnavailable as exc:
        fail(ExitCode.NO_COMPILER, f"{why or f'--confirm needs the {target} compiler'}: {exc}", console)


def report_unpredicted(reports: Sequence[Any], console: Console, outcome: Outcome) -> None:
    """A compilation the compiler judges otherwise than the analysis: said in XLA's words, and
    an error of the run."""
    for report in reports:
        for difference in report.unpredicted:
            name = report.function.name if report.function else report.module_name
            console.note(console.styled_error(f"offload-fixer: {name}: {difference}"), always=True)
            outcome.failure = outcome.failure or ExitCode.FINDINGS


def report_compiled(reports: Sequence[Any], console: Console) -> None:
    """``--confirm`` where the compiler compiled every compilation: said, so that a clean
    report is known to be the compiler's verdict too, not only the analysis's."""
    verdicts = [report.xla for report in reports if report.xla is not None]
    if not verdicts or len(verdicts) != len(reports) or any(v.outcome != "compiled" for v in verdicts):
        return
    if any(report.unpredicted for report in reports):
        return
    compilers = ", ".join(sorted({v.compiler for v in verdicts}))
    count = len(verdicts)
    console.note(
        f"offload-fixer: --confirm: {compilers} compiled {count} compilation{'s' if count != 1 else ''}, as predicted"
    )
