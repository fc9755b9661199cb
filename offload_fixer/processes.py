"""One report for a program run as several processes under ``jax.distributed``.

``offload-fixer run`` in each process of a multi-process program (a process per host of a pod,
or several CPU processes on one machine with a coordinator on the loopback address) checks
that process's compilations. When the programs end, each process sends what it found to
process 0 through the coordinator the program started
(:func:`offload_fixer.jax_compat.distributed.gather`); process 0 merges them (identical
findings once, as recompilations in one process merge) and reports for all, and it alone
writes: the fix, ``--report`` and the run left for the editor. The other processes say
where their findings went and exit with the status their own findings give.
"""

from __future__ import annotations

import json
from typing import Any

from offload_fixer.interception import RunResult, report_key
from offload_fixer.model import Report

GATHER_TIMEOUT_S = 300.0
"""How long process 0 waits for another process's findings after its own program ended
(JAX's own default for a process to reach ``jax.distributed.shutdown``)."""


def share(result: RunResult, timeout_s: float = GATHER_TIMEOUT_S) -> None:
    """Send ``result`` to process 0 of a ``jax.distributed`` program, or, on process 0, merge
    every process's into it; nothing for a program of one process."""
    from offload_fixer.jax_compat import distributed

    where = distributed.place()
    if where is None or where[1] <= 1:
        return
    result.process, result.processes = where
    gathered = distributed.gather(json.dumps(_encoded(result)), timeout_s)
    if gathered is None:
        return
    for process, payload in enumerate(gathered):
        if process == 0:
            continue
        if payload is None:
            result.unheard.append(process)
            continue
        _merge(result, process, json.loads(payload))


def _encoded(result: RunResult) -> dict[str, Any]:
    return {
        "reports": [report.to_dict() for report in result.reports],
        "checked": result.checked,
        "intercepted": result.intercepted,
        "sources": result.sources,
        "texts": result.texts,
        "tool_warnings": result.tool_warnings,
        "program_exit_code": result.program_exit_code,
        "program_exception": result.program_exception,
    }


def _merge(result: RunResult, process: int, other: dict[str, Any]) -> None:
    """Another process's findings into process 0's: a report identical to one already here
    is the same compilation, checked in both."""
    seen = {report_key(report) for report in result.reports}
    for encoded in other["reports"]:
        report = Report.from_dict(encoded)
        if report_key(report) in seen:
            continue
        seen.add(report_key(report))
        result.reports.append(report)
        result.checked += 1
    result.intercepted += int(other["intercepted"])
    for path, digest in other["sources"].items():
        result.sources.setdefault(path, digest)
        if path in other["texts"]:
            result.texts.setdefault(path, other["texts"][path])
    for warning in other["tool_warnings"]:
        if warning not in result.tool_warnings:
            result.tool_warnings.append(f"process {process}: {warning}")
    if other["program_exit_code"] and not result.program_exit_code:
        result.program_exit_code = int(other["program_exit_code"])
        said = other["program_exception"] or ""
        result.program_exception = f"process {process}: {said}" if said else None
