"""Entry points of the static check: one source text, or files and directories."""

from __future__ import annotations

import ast
import concurrent.futures
import hashlib
import io
import multiprocessing
import os
import sys
import threading
import tokenize
from collections.abc import Collection, Generator, Iterable, MutableMapping, Sequence
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


BYTES_PER_WORKER = 1 << 20
"""Source that passed the text prefilter per process when ``jobs`` is left to the check:
about 1.5 s of libcst parsing, against a pool start of ~50 ms (fork) to ~0.6 s (forkserver,
which imports the parser in each worker). Most trees have far less (jax, flax and optax
together: 5 of 855 files, 0.29 MB), and there one process is faster than a pool.
``benchmarks/static_check.py --compare-jobs`` measures it."""


def check_source(source: str | bytes, path: str = "<string>", target: str = "tpu",
                 jax_version: str | None = None, cache: SourceCache | None = None,
                 project: Project | None = None, require_syntax: bool = False) -> StaticResult:
    """Check one file's text without importing or running it.

    ``jax_version`` picks the rules of that JAX release (default: the installed one);
    ``target`` is ``tpu`` or ``gpu`` and sets the severity. An editor passes
    the same :class:`SourceCache` for every version of a document, so that only the
    statements a change touched are parsed again; the result is the same without it.
    Imports of other modules of the project (next to ``path``, or in its package) are read
    from disk through ``project``, which keeps what it read between calls.
    ``require_syntax``: report a syntax error even where the prefilter rules the text out.
    """
    target = normalize_target(target)
    spelling = jax_compat.spelling(jax_version)
    result = _check(source, path, target, spelling, cache, project or Project())
    if require_syntax and not result.analysed:
        return StaticResult(path, parse_error=syntax_error(source, path))
    return result


def check_paths(paths: Iterable[str], target: str = "tpu", jax_version: str | None = None,
                jobs: int | None = 1, excludes: Sequence[str] = (),
                check_syntax: Collection[str] = (), *,
                caches: MutableMapping[str, SourceCache] | None = None) -> Generator[StaticResult, None, None]:
    """Check files and directories (walked, honouring ``.gitignore`` and ``excludes``, which
    are gitignore-style patterns relative to each directory given). Yields one result per
    ``.py`` file (and ``.ipynb`` notebook where nbformat is installed), in walk order.
    ``jobs``: at most that many processes; 0 or ``None`` lets :func:`worker_count` decide. A
    file in ``check_syntax`` (a file named on the command line) is parsed even when the
    prefilter rules it out, so a syntax error in it is reported. ``caches``: a
    :class:`SourceCache` per path, filled and reused by the files checked in this process, so
    that checking again after a fix parses only the statements the fix changed."""
    from offload_fixer.notebook import NotebookError, read_program_bytes

    target = normalize_target(target)
    spelling = jax_compat.spelling(jax_version)
    paths = [os.fspath(p) for p in paths]
    roots = tuple(p for p in paths if os.path.isdir(p))
    project = Project(roots)
    pending: list[StaticResult | tuple[bytes, str]] = []
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
               else _unselected(*item, check_syntax) for item in pending]
    candidates = [item for item in pending if isinstance(item, tuple)]
    workers = worker_count(jobs, len(candidates), sum(len(data) for data, _ in candidates))
    if workers <= 1:
        for item in pending:
            if not isinstance(item, tuple):
                yield item
                continue
            cache = caches.setdefault(item[1], SourceCache()) if caches is not None else None
            yield _check(*item, target, spelling, cache, project)
        return
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context()) as pool:
        futures = {id(item): pool.submit(_check_in_worker, *item, target, spelling, roots) for item in candidates}
        try:
            for item in pending:
                yield futures[id(item)].result() if isinstance(item, tuple) else item
        finally:  # a caller that stops early: drop what has not started, wait for the rest
            for future in futures.values():
                future.cancel()


def worker_count(jobs: int | None, candidates: int, size: int) -> int:
    """Processes for ``candidates`` files (``size`` bytes) that passed the text prefilter:
    ``jobs`` > 0 caps them; otherwise one per :data:`BYTES_PER_WORKER`, and no more than the
    cores other work leaves idle (on a busy machine a pool only adds its start-up)."""
    if candidates < 2:
        return 1
    if jobs:
        return max(1, min(jobs, candidates))
    return max(1, min(idle_cores() + 1, candidates, size // BYTES_PER_WORKER))


def idle_cores() -> int:
    """Cores this process may use, less the one-minute load average (this process included)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return max(int(cores - load), 0)


def _pool_context() -> multiprocessing.context.BaseContext:
    """fork from a single-threaded caller (the CLI): workers start in milliseconds with the
    parser already imported, and leave no server process behind. A caller with threads
    running (an editor's language server, a test run, a process that imported JAX) would
    risk a deadlock in the forked child, so it gets forkserver, whose workers fork from a
    clean server."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and _single_threaded() and "jax" not in sys.modules:
        from . import interpreter, policies, rules, source  # noqa: F401  (inherited by every worker)

        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _single_threaded() -> bool:
    try:
        return len(os.listdir("/proc/self/task")) == 1  # native threads too (Linux)
    except OSError:
        return threading.active_count() == 1


def syntax_error(source: str | bytes, path: str) -> ParseError | None:
    """Where ``source`` stops being Python (CPython's parser: about ten times libcst's speed),
    or ``None`` when it parses."""
    text = source
    if isinstance(source, bytes):
        text, error = _decode(source, path)
        if error is not None:
            return error
    try:
        ast.parse(text, path)
    except SyntaxError as exc:
        return ParseError(path, exc.lineno or 1, exc.offset or 1, exc.msg)
    except ValueError as exc:  # a NUL byte
        return ParseError(path, 1, 1, str(exc))
    return None


def _unselected(data: bytes, path: str, check_syntax: Collection[str]) -> StaticResult:
    """A file the project's prefilter rules out: a syntax error is still reported when it was
    named on the command line."""
    return StaticResult(path, parse_error=syntax_error(data, path)) if path in check_syntax else StaticResult(path)


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
    if isinstance(source, bytes):
        decoded, error = _decode(source, path)
        if error is not None:
            return StaticResult(path, parse_error=error, analysed=True)
        text = decoded
    else:
        text = source
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
    diagnostics, dependencies = _analyse(parsed, text, path, target, spelling, digest, project)
    return StaticResult(path, tuple(diagnostics), analysed=True, dependencies=dependencies)


def _analyse(parsed: ParsedSource | libcst.Module, text: str, path: str, target: str, spelling: jax_compat.Spelling,
             source_sha256: str | None = None,
             project: Project | None = None) -> tuple[list[Diagnostic], tuple[str, ...]]:
    """Diagnostics of a parsed text (a module parsed whole is located statement by statement),
    and the other modules of the project read for them."""
    from .interpreter import Interpreter
    from .policies import unpinned_policies
    from .rules import diagnostics, findings
    from .source import ParsedSource, Sources

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
