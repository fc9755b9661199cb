"""The static check's results kept between runs, as ruff keeps its own: a second ``check`` of
an unchanged tree reads them instead of parsing and analysing again.

One entry per checked file and settings, a small JSON file under
``<project>/.offload-fixer-cache/<version>/`` (the project is the directory of the
``pyproject.toml`` that configures the run, else the working directory). An entry holds while

- the file's bytes are the same (its SHA-256 is in the entry's key, with the target, the JAX
  rules' spelling, the working directory the paths are relative to, the Python, libcst and
  offload-fixer versions, and the size and time of every module of offload-fixer itself, so
  an edited or reinstalled tool never reads an older one's results);
- every project module the check read has the same bytes, and every directory whose entries
  decided where an import led lists the same modules (:meth:`Project.digests`): a module
  added where an import now finds it makes the entry stale as an edit would.

Only files the prefilter lets through are kept: the rest cost less to screen again than to
look up. A notebook's program (its code cells, masked, as one text) is kept too, while the
notebook's bytes are the same (:meth:`ResultCache.notebook_program`): decoding a notebook's JSON and
masking its cells cost ten times what hashing it does. Entries are written to a temporary file and renamed into place, so concurrent runs
(pre-commit's parallel batches, an editor's save beside a CI job) each read a whole entry or
none; a file that cannot be read, parsed or written is a miss, never an error. JSON, never
pickle: a cache directory can come from anywhere a checkout does, and one that leads out of
the project (a symlink) is not used at all (:mod:`offload_fixer.state_folders`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from offload_fixer import installed
from offload_fixer.findings import FixMark
from offload_fixer.jax_compat import Spelling
from offload_fixer.model import Diagnostic, Span
from offload_fixer.source.decoding import read_regular_file
from offload_fixer.state_folders import StateFolder
from offload_fixer.version import __version__

from .manifest import Manifest
from .project import Project
from .results import ParseError, StaticResult

DIRECTORY = ".offload-fixer-cache"
FORMAT = 1
"""Bumped when an entry's layout changes."""
TOP_FILES = {
    ".gitignore": "# Written by offload-fixer.\n*\n",
    "CACHEDIR.TAG": "Signature: 8a477f597d28d172789f06886806bc55\n# offload-fixer's results\n",
}
"""Beside the versions' folders: git and backup tools leave the cache alone."""


class ResultCache:
    """The results of one project's checks, in ``root / DIRECTORY / <version>``; not used where
    that folder leads out of the project (:attr:`refusal` says so)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.folder = StateFolder(root, (DIRECTORY, __version__), TOP_FILES)
        self._tool: str | None = None
        self._manifest: Manifest | None = None
        self.hits = self.misses = 0

    @property
    def refusal(self) -> str | None:
        """Why the cache is not used (its folder leads out of the project), for the command to say."""
        return self.folder.refusal

    def manifest(self) -> Manifest | None:
        """The facts of the files earlier runs read (:mod:`.manifest`), kept beside the
        results; None where the cache cannot be written, or on Windows, whose ``st_ctime`` is
        the file's creation (an edit that restores size and mtime would go unseen)."""
        if self._manifest is None and os.name != "nt" and (real := self.folder.resolve()) is not None:
            self._manifest = Manifest(Path(real), self._tool_fingerprint(), self.folder.write)
        return self._manifest

    def get(
        self,
        sha256: str,
        path: str,
        target: str,
        spelling: Spelling,
        python: tuple[int, int] | None,
        project: Project,
    ) -> StaticResult | None:
        """The result kept for this file (``sha256``: the hex digest of its bytes), if it still holds."""
        try:
            entry = json.loads(self._entry(path, target, spelling, python).read_bytes())
            if entry["key"] != self._key_of(bytes.fromhex(sha256)) or not project.unchanged(entry["consulted"]):
                raise LookupError
            result = _result(entry["result"])
        except (OSError, ValueError, LookupError, TypeError, AttributeError):
            self.misses += 1
            return None
        self.hits += 1
        return result

    def put(
        self,
        data: bytes,
        path: str,
        target: str,
        spelling: Spelling,
        python: tuple[int, int] | None,
        result: StaticResult,
        digests: dict[str, str],
    ) -> None:
        """Keep ``result``, found while the disk answered as ``digests`` say. A failure of the
        check itself is not kept: the next run tries the file again."""
        if result.internal_error is not None:
            return
        entry = {"key": self._key(data), "consulted": digests, "result": _encoded(result)}
        self._write(self._entry(path, target, spelling, python), entry)

    def notebook_program(self, path: str, validate: bool = False) -> bytes:
        """:func:`~offload_fixer.notebook.read_program_bytes` of a notebook, kept for its path
        while its bytes (and the tool) are the same: a second run hashes the file where the first
        decoded its JSON and masked its cells. ``validate``: the notebook is checked against
        nbformat's schema as well, and that verdict kept with the nbformat version that gave it
        (an unchanged notebook is never validated, nor nbformat imported, twice). Raises
        :class:`~offload_fixer.notebook.NotebookError` (:class:`NotPythonNotebook`) as reading
        the notebook does, from what was kept or anew."""

        from offload_fixer.notebook import NotebookError, NotebookFile, NotPythonNotebook

        try:
            data = read_regular_file(path)
        except OSError as exc:
            raise NotebookError(f"cannot read file: {exc.strerror or exc}") from exc
        key = self._key(data)
        destination = self._notebook_entry(path)
        try:
            kept = json.loads(destination.read_bytes())
            if not isinstance(kept, dict) or kept.get("key") != key:
                kept = {}
        except (OSError, ValueError):
            kept = {}
        schema = installed.version("nbformat") if validate else None
        read: Any = kept.get("read")
        verdict: Any = kept.get("schema")
        changed = not isinstance(read, dict)
        if changed:
            try:
                program = NotebookFile.from_bytes(path, data, validate=False).program.data
            except NotPythonNotebook as exc:
                read = {"language": exc.language}
            except NotebookError as exc:
                read = {"error": str(exc)}
            else:
                read = {"program": program.decode("utf-8")}
            verdict = None
        if validate and "program" in read and not (isinstance(verdict, list) and verdict[:1] == [schema]):
            try:
                NotebookFile.from_bytes(path, data, validate=True)
            except NotebookError as exc:
                verdict = [schema, str(exc)]
            else:
                verdict = [schema, None]
            changed = True
        if changed:
            entry: dict[str, Any] = {"key": key, "read": read}
            if verdict is not None:
                entry["schema"] = verdict
            self._write(destination, entry)
        try:
            if "language" in read:
                raise NotPythonNotebook(str(read["language"]))
            if "error" in read:
                raise NotebookError(str(read["error"]))
            program = str(read["program"]).encode("utf-8")
            if validate and isinstance(verdict, list) and verdict[1] is not None:
                raise NotebookError(str(verdict[1]))
        except (KeyError, TypeError, IndexError, UnicodeError):  # an entry of another shape: read anew
            return read_program_bytes_checked(path, data, validate)
        return program

    def keep_verdict(self, path: str, sha256: str, error: str | None) -> None:
        """Keep nbformat's verdict on a notebook validated elsewhere (a worker of the pool),
        where the notebook's entry is for the bytes judged (``sha256``)."""
        destination = self._notebook_entry(path)
        try:
            kept = json.loads(destination.read_bytes())
            if not isinstance(kept, dict) or not isinstance(kept.get("read"), dict) or "program" not in kept["read"]:
                return
            if kept.get("key") != self._key_of(bytes.fromhex(sha256)):
                return
        except (OSError, ValueError):
            return
        kept["schema"] = [installed.version("nbformat"), error]
        self._write(destination, kept)

    def _notebook_entry(self, path: str) -> Path:
        import hashlib

        name = json.dumps(["notebook", os.path.abspath(path)]).encode("utf-8", "surrogateescape")
        return self._in_folder(f"{hashlib.sha256(name).hexdigest()[:40]}.json")  # one per notebook

    def fix_marks(
        self,
        diagnostics: Sequence[Diagnostic],
        settings: Sequence[Any],
        plan: Callable[[], Mapping[Diagnostic, FixMark]],
    ) -> dict[Diagnostic, FixMark]:
        """What ``--fix`` would do about each finding (``plan()``: the planner's answer), kept
        for these findings, the planner's ``settings`` and the bytes of every file the findings
        name: a second run over unchanged findings plans no fix again."""
        import hashlib

        files = sorted({span.path for d in diagnostics for span in _spans(d) if span.path})
        contents = []
        for path in files:
            try:  # a FIFO or device a finding names (one that cannot be read) is never opened to read
                contents.append(hashlib.sha256(read_regular_file(path)).hexdigest())
            except OSError:
                contents.append("")
        described = json.dumps(
            [[d.to_dict() for d in diagnostics], list(settings), files, contents, os.getcwd()], default=str
        )
        key = hashlib.sha256(self._tool_fingerprint().encode() + described.encode("utf-8", "surrogateescape"))
        entry = self._in_folder(f"marks-{key.hexdigest()[:40]}.json")
        try:
            kept = json.loads(entry.read_bytes())
            return {diagnostics[index]: FixMark(**mark) for index, mark in kept}
        except (OSError, ValueError, LookupError, TypeError):
            pass
        marks = dict(plan())
        index = {d: i for i, d in enumerate(diagnostics)}
        self._write(entry, [[index[d], vars(mark)] for d, mark in marks.items() if d in index])
        return marks

    def read(self, name: str) -> Any:
        """The value :meth:`keep` kept as ``name``, or ``None`` (never kept, unreadable)."""
        try:
            return json.loads(self._in_folder(name).read_bytes())
        except (OSError, ValueError):
            return None

    def keep(self, name: str, value: Any) -> None:
        """Keep ``value`` (JSON) as ``name`` beside the results, whole or not at all: how
        another of the tool's engines keeps what it found between runs in the same folder
        (``run``'s verdicts, :mod:`offload_fixer.verdicts`)."""
        self._write(self._in_folder(name), value)

    def tool(self) -> str:
        """What an entry is only valid for: this offload-fixer (each of its modules' size and
        time), Python and libcst."""
        return self._tool_fingerprint()

    def _write(self, destination: Path, value: Any) -> None:
        """``value`` as JSON at ``destination``, whole or not at all."""
        try:
            data = json.dumps(value).encode("utf-8", "surrogateescape")
        except (TypeError, ValueError, UnicodeError):
            return
        self.folder.write(destination.name, data)

    def _in_folder(self, name: str) -> Path:
        """The entry ``name`` in the cache's folder (a path that reads nothing where the folder
        is not used: every lookup misses)."""
        real = self.folder.resolve()
        return Path(real if real is not None else os.devnull, name)

    def _entry(self, path: str, target: str, spelling: Spelling, python: tuple[int, int] | None) -> Path:
        import hashlib  # here: a run whose files the prefilter all rules out needs none of this

        # ``python``: the file's target-version, which decides whether newer syntax is an error
        name = json.dumps([os.path.abspath(path), path, os.getcwd(), target, repr(spelling), python])
        return self._in_folder(f"{hashlib.sha256(name.encode('utf-8', 'surrogateescape')).hexdigest()[:40]}.json")

    def _key(self, data: bytes) -> str:
        import hashlib

        return self._key_of(hashlib.sha256(data).digest())

    def _key_of(self, digest: bytes) -> str:
        import hashlib

        return hashlib.sha256(self._tool_fingerprint().encode() + digest).hexdigest()

    def _tool_fingerprint(self) -> str:
        if self._tool is None:
            package = Path(__file__).resolve().parent.parent
            modules = sorted(
                (str(p.relative_to(package)), p.stat().st_size, p.stat().st_mtime_ns) for p in package.rglob("*.py")
            )
            self._tool = json.dumps(
                [FORMAT, __version__, sys.version, installed.version("libcst"), modules], separators=(",", ":")
            )
        return self._tool


def read_program_bytes_checked(path: str, data: bytes, validate: bool) -> bytes:
    """A notebook's program from its bytes, validated where asked, as if nothing was kept."""
    from offload_fixer.notebook import NotebookFile

    program = NotebookFile.from_bytes(path, data, validate=False).program.data
    if validate:
        NotebookFile.from_bytes(path, data, validate=True)
    return program


def _spans(d: Diagnostic) -> list[Span]:
    spans = [d.span, d.return_span, d.origin.span if d.origin else None, *(step.span for step in d.trace)]
    if d.function is not None and d.function.path:
        spans.append(Span(d.function.path, d.function.line or 1))
    return [span for span in spans if span is not None]


def _encoded(result: StaticResult) -> dict[str, Any]:
    error = result.parse_error
    return {
        "path": result.path,
        "diagnostics": [d.to_dict() for d in result.diagnostics],
        "parse_error": None if error is None else [error.path, error.line, error.col, error.message],
        "analysed": result.analysed,
        "dependencies": list(result.dependencies),
    }


def _result(encoded: dict[str, Any]) -> StaticResult:
    error = encoded["parse_error"]
    return StaticResult(
        encoded["path"],
        tuple(Diagnostic.from_dict(d) for d in encoded["diagnostics"]),
        None if error is None else ParseError(*error),
        bool(encoded["analysed"]),
        dependencies=tuple(encoded["dependencies"]),
    )
