"""The ``json`` format: a :class:`Report` document ``Report.from_dict`` reads back."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from offload_fixer.model import Diagnostic, MeasuredFix, Report
from offload_fixer.report.places import (
    TOOL_NAME,
    FileError,
    common_target,
    installed_jax,
    sort_key,
    unpredicted,
    verdict_record,
)
from offload_fixer.version import __version__

if TYPE_CHECKING:
    from offload_fixer.suppression import UnusedSuppression


def format_json(
    diagnostics: Sequence[Diagnostic],
    file_errors: Sequence[FileError] = (),
    unused_suppressions: Sequence[UnusedSuppression] = (),
    *,
    target: str | None = None,
    jax_version: str | None = None,
    compilations: Sequence[Report] = (),
    measured: Sequence[MeasuredFix] = (),
) -> dict[str, Any]:
    """A :class:`Report` document (``Report.from_dict`` reads it back) plus what was not checked.
    With ``--confirm``, ``unpredicted`` lists every verdict the analysis did not predict
    (``function: difference``) and ``compilations`` every compiler verdict, in XLA's words.
    ``fixes``: each fix ``run`` compiled, with its memory figures in bytes (``MeasuredFix``)."""
    report = Report(
        diagnostics=tuple(sorted(diagnostics, key=sort_key)),
        target=target or common_target(diagnostics),
        jax_version=jax_version or installed_jax(),
        unpredicted=unpredicted(compilations),
    )
    document = report.to_dict()
    if compilations:
        document["compilations"] = [verdict_record(compiled) for compiled in compilations]
    if measured:
        document["fixes"] = [fix.to_dict() for fix in measured]
    document["tool"] = {"name": TOOL_NAME, "version": __version__}
    document["file_errors"] = [dataclasses.asdict(e) for e in file_errors]
    document["unused_suppressions"] = [
        {"path": u.path, "line": u.line, "col": u.col, "cell": u.cell, "codes": list(u.codes), "message": u.message}
        for u in unused_suppressions
    ]
    return document
