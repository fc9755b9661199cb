"""How :func:`~offload_fixer.static.api.check_paths` reads what it checks: a notebook's program
(its facts kept by the manifest where the notebook is unchanged), the bytes of a file to check
(read only then where the manifest vouched for it), the results earlier runs kept, and
nbformat's verdict on a notebook, found here or by a worker of the pool and kept for the next
run."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from offload_fixer import jax_compat
from offload_fixer.source.decoding import read_regular_file

from .project import Project
from .results import ParseError, StaticResult
from .text_facts import TextFacts

if TYPE_CHECKING:
    from .cache import ResultCache
    from .manifest import Manifest


def notebook_program(path: str, results: ResultCache | None) -> bytes | StaticResult:
    """A notebook's program (kept in ``results`` by the notebook's bytes), or its result when it
    cannot be read: the notebook package is loaded only for a tree that holds notebooks."""
    from offload_fixer.notebook import NotebookError, NotPythonNotebook, read_program_bytes

    try:
        return results.notebook_program(path) if results is not None else read_program_bytes(path, validate=False)
    except NotPythonNotebook as exc:
        return StaticResult(path, skipped=str(exc))
    except NotebookError as exc:
        unreadable = isinstance(exc.__cause__, OSError)
        return StaticResult(path, parse_error=ParseError(path, 1, 1, str(exc), unreadable))


def notebook_facts(path: str, results: ResultCache | None, manifest: Manifest) -> TextFacts | StaticResult:
    """:func:`notebook_program` as facts of the program, kept by the notebook's ``stat`` with
    what reading it gave: an unchanged notebook is read only where its program is checked."""
    facts = manifest.facts(os.path.abspath(path), lambda: _notebook_bytes(path, results))
    outcome: Any = facts.known.get("notebook", False) if facts is not None else False
    if outcome is False:
        read = notebook_program(path, results)
        if facts is None:
            return TextFacts(read) if isinstance(read, bytes) else read
        if isinstance(read, bytes):
            facts.give(read)
            outcome = None
        else:
            outcome = ["skipped", read.skipped] if read.parse_error is None else ["error", read.parse_error.message]
        facts.keep("notebook", outcome)
    assert facts is not None
    if outcome is None:
        return facts
    if outcome[0] == "skipped":
        return StaticResult(path, skipped=outcome[1])
    return StaticResult(path, parse_error=ParseError(path, 1, 1, outcome[1]))


def _notebook_bytes(path: str, results: ResultCache | None) -> bytes | None:
    read = notebook_program(path, results)
    return read if isinstance(read, bytes) else None


def read_for_check(
    entry: tuple[TextFacts, str, str, jax_compat.Spelling, tuple[int, int] | None], project: Project
) -> tuple[bytes, str, str, jax_compat.Spelling, tuple[int, int] | None] | StaticResult:
    """A file to check, with its bytes (read now where the manifest vouched for the file)."""
    data = entry[0].data
    path = entry[1]
    if data is None:
        return StaticResult(path, parse_error=ParseError(path, 1, 1, "cannot read: removed while the check ran", True))
    project.remember(path, data)
    return (data, *entry[1:])


def kept_result(
    entry: tuple[TextFacts, str, str, jax_compat.Spelling, tuple[int, int] | None],
    results: ResultCache,
    project: Project,
    notebook: bool,
) -> tuple | StaticResult:
    """An earlier run's result for ``entry`` where it still holds (a notebook's once it is
    validated), else the entry, to be checked."""
    kept = results.get(entry[0].sha256, *entry[1:], project)
    if kept is None:
        return entry
    if notebook and isinstance(refusal := validated(entry, results), StaticResult):
        return refusal  # nbformat refuses the notebook now: its kept findings do not stand
    return kept


def validated(entry: tuple, results: ResultCache | None = None) -> tuple | StaticResult:
    """A selected notebook's entry, or its result when nbformat refuses the file (the verdict
    kept in ``results`` where it holds one for the notebook's bytes)."""
    from offload_fixer.notebook import NotebookError, NotebookFile

    try:
        if results is not None:
            results.notebook_program(entry[1], validate=True)
        else:
            NotebookFile.read(entry[1])
    except NotebookError as exc:
        return StaticResult(entry[1], parse_error=ParseError(entry[1], 1, 1, str(exc)))
    return entry


def validated_here(path: str) -> tuple[StaticResult | None, tuple[str, str | None] | None]:
    """:func:`validated` of a notebook (its result where nbformat refuses it), and the verdict
    with the SHA-256 of the bytes judged (None where they could not be read)."""
    import hashlib

    from offload_fixer.notebook import NotebookError, NotebookFile

    try:
        data = read_regular_file(path)
    except OSError:
        checked = validated((None, path))
        return (checked if isinstance(checked, StaticResult) else None), None
    digest = hashlib.sha256(data).hexdigest()
    try:
        NotebookFile.from_bytes(path, data, validate=True)
    except NotebookError as exc:
        return StaticResult(path, parse_error=ParseError(path, 1, 1, str(exc))), (digest, str(exc))
    return None, (digest, None)
