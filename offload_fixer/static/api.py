"""Entry points of the static check: one source text, or files and directories."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import hashlib
import io
import os
import tokenize
from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from offload_fixer import jax_compat
from offload_fixer.model import Diagnostic, normalize_target

from .files import python_files
from .outline import SourceCache, outline
from .prefilter import references_jit
from .project import Project

if TYPE_CHECKING:
    import libcst

    from .source import ParsedSource


@dataclass(frozen=True)
class ParseError:
    """A file the check could not read as Python: 1-based line and column."""

    path: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.message}"


@dataclass(frozen=True)
class StaticResult:
    """The check of one file: its diagnostics, or why it could not be read."""

    path: str
    diagnostics: tuple[Diagnostic, ...] = ()
    parse_error: ParseError | None = None
    analysed: bool = False
    """False when the prefilter showed the file cannot hold a host move the check models."""
    dependencies: tuple[str, ...] = ()
    """Other modules of the project the check read for this file (absolute paths): the result
    holds while they are unchanged."""


def check_source(source: str | bytes, path: str = "<string>", target: str = "tpu",
                 jax_version: str | None = None, cache: SourceCache | None = None,
                 project: Project | None = None) -> StaticResult:
    """Check one file's text without importing or running it.

    ``jax_version`` picks the rules of that JAX release (default: the installed one);
    ``target`` is ``tpu`` or ``gpu`` and sets the severity. An editor passes
    the same :class:`SourceCache` for every version of a document, so that only the
    statements a change touched are parsed again; the result is the same without it.
    Imports of other modules of the project (next to ``path``, or in its package) are read
    from disk through ``project``, which keeps what it read between calls.
    """
    target = normalize_target(target)
    spelling = jax_compat.spelling(jax_version)
    return _check(source, path, target, spelling, cache, project or Project())


def check_paths(paths: Iterable[str], target: str = "tpu", jax_version: str | None = None,
                jobs: int = 1, excludes: Sequence[str] = (), *,
                caches: MutableMapping[str, SourceCache] | None = None) -> Iterator[StaticResult]:
    """Check files and directories (walked, honouring ``.gitignore`` and ``excludes``, which
    are gitignore-style patterns relative to each directory given). Yields one result per
    ``.py`` file (and ``.ipynb`` notebook where nbformat is installed), in walk order;
    ``jobs`` > 1 analyses files in that many processes. ``caches``: a :class:`SourceCache`
    per path, filled and reused by files checked in this process, so that checking again
    after a fix parses only the statements the fix changed."""
    from offload_fixer.notebook import NotebookError, read_program_bytes

    target = normalize_target(target)
    spelling = jax_compat.spelling(jax_version)
    paths = [os.fspath(p) for p in paths]
    roots = tuple(p for p in paths if os.path.isdir(p))
    project = Project(roots)
    pending: list = []
    for path in python_files(paths, excludes):
        try:
            data = read_program_bytes(path)
        except OSError as exc:
            pending.append(StaticResult(path, parse_error=ParseError(path, 1, 1, f"cannot read file: {exc}")))
            continue
        except NotebookError as exc:
            pending.append(StaticResult(path, parse_error=ParseError(path, 1, 1, str(exc))))
            continue
        project.remember(path, data)
        pending.append((data, path))
    # Every file is read before any is selected: a host spelling in one module makes the
    # modules that import it candidates.
    pending = [item if isinstance(item, StaticResult) or project.selects(item[1], item[0])
               else StaticResult(item[1]) for item in pending]
    candidates = [item for item in pending if isinstance(item, tuple)]
    if jobs <= 1 or len(candidates) < 2:
        for item in pending:
            if not isinstance(item, tuple):
                yield item
                continue
            cache = caches.setdefault(item[1], SourceCache()) if caches is not None else None
            yield _check(*item, target, spelling, cache, project)
        return
    # forkserver: workers fork from a clean server, never from a caller that has JAX's threads
    # running (an LSP, a test run, `offload-fixer run`), which fork would risk deadlocking.
    context = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {id(item): pool.submit(_check_in_worker, *item, target, spelling, roots) for item in candidates}
        for item in pending:
            yield futures[id(item)].result() if isinstance(item, tuple) else item


_WORKER_PROJECTS: dict[tuple[str, ...], Project] = {}


def _check_in_worker(source: bytes, path: str, target: str, spelling: jax_compat.Spelling,
                     roots: tuple[str, ...]) -> StaticResult:
    """One file in a worker process, which keeps one project per set of roots for all its files."""
    project = _WORKER_PROJECTS.get(roots)
    if project is None:
        project = _WORKER_PROJECTS[roots] = Project(roots)
    return _check(source, path, target, spelling, None, project)


def _check(source: str | bytes, path: str, target: str, spelling: jax_compat.Spelling,
           cache: SourceCache | None, project: Project) -> StaticResult:
    data = source if isinstance(source, bytes) else source.encode("utf-8", "surrogatepass")
    if not project.selects(path, data):
        return StaticResult(path)
    text = source
    if isinstance(source, bytes):
        text, error = _decode(source, path)
        if error is not None:
            return StaticResult(path, parse_error=error, analysed=True)
    syntax_error = None
    found = None
    try:
        found = outline(text, cache)
    except (SyntaxError, ValueError) as exc:
        # libcst may still parse syntax newer than this interpreter's; if not, CPython's
        # message and position are the ones users know.
        syntax_error = exc
    if found is not None and not references_jit(found.tree):
        return StaticResult(path, analysed=True)

    import libcst as cst

    from .source import parse_source

    try:
        parsed = parse_source(text, found, cache)
    except cst.ParserSyntaxError as exc:
        if isinstance(syntax_error, SyntaxError):
            error = ParseError(path, syntax_error.lineno or 1, syntax_error.offset or 1, syntax_error.msg)
        else:
            error = ParseError(path, exc.raw_line, exc.raw_column + 1, exc.message)
        return StaticResult(path, parse_error=error, analysed=True)
    digest = hashlib.sha256(data).hexdigest()
    found, dependencies = _analyse(parsed, text, path, target, spelling, digest, project)
    return StaticResult(path, tuple(found), analysed=True, dependencies=dependencies)


def _analyse(parsed: ParsedSource | libcst.Module, text: str, path: str, target: str, spelling: jax_compat.Spelling,
             source_sha256: str | None = None,
             project: Project | None = None) -> tuple[list[Diagnostic], tuple[str, ...]]:
    """Diagnostics of a parsed text (a module parsed whole is located statement by statement),
    and the other modules of the project read for them."""
    from .interpreter import Interpreter
    from .rules import diagnostics, findings
    from .source import ParsedSource, Sources

    from .policies import unpinned_policies

    if not isinstance(parsed, ParsedSource):
        parsed = ParsedSource(parsed)
    policies = unpinned_policies(parsed, text, path, target, source_sha256)
    interpreter = Interpreter(parsed.module, text, parsed.memos(), project, None if path.startswith("<") else path)
    found = []
    try:
        sites = interpreter.jit_sites()
        for jitted in sites:
            try:
                site = interpreter.analyse(jitted)
            except RecursionError:
                continue
            if site is not None:
                found.extend(findings(site, spelling))
    except RecursionError:
        pass
    foreign = [(module_path, scope) for module_path, scope in interpreter.foreign.items() if scope is not None]
    dependencies = tuple(module_path for module_path, _ in foreign)
    if not found:
        return policies, dependencies
    # Positions cost about three parses: only the statements that findings name pay for them.
    others = [(_display_path(module_path, path), scope.source(), scope.facts.sha256) for module_path, scope in foreign]
    sources = Sources(parsed, path, others, source_sha256)
    return diagnostics(found, sources, target, spelling) + policies, dependencies


def _display_path(module_path: str, checked: str) -> str:
    """Another module's path in the style of the checked file's: relative when it is."""
    if os.path.isabs(checked):
        return module_path
    relative = os.path.relpath(module_path)
    return module_path if relative.startswith("..") else relative


def _decode(data: bytes, path: str) -> tuple[str, ParseError | None]:
    """Decode like Python does (BOM, PEP 263 cookie, else UTF-8), reporting where it fails."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        return "", ParseError(path, exc.lineno or 1, 1, exc.msg)
    try:
        return data.decode(encoding), None
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return "", ParseError(path, line, col, f"not valid {encoding}: {exc.reason} (byte 0x{data[exc.start]:02x})")
