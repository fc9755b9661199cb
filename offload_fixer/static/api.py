"""Entry points of the static check: one source text, or files and directories."""

from __future__ import annotations

import concurrent.futures
import hashlib
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from offload_fixer import jax_compat
from offload_fixer.model import Diagnostic, normalize_target
from offload_fixer.recursion import call_allowing_deep_recursion
from offload_fixer.source.text import SourceDecodeError, decode

from .files import Unreadable, walk
from .outline import SourceCache, outline
from .prefilter import references_jit
from .project import Project

if TYPE_CHECKING:
    import libcst

    from offload_fixer.config import Settings

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
                jobs: int = 1, excludes: Sequence[str] = (),
                settings_for: Callable[[str], Settings] | None = None) -> Iterator[StaticResult]:
    """Check files and directories (walked, honouring ``.gitignore`` and ``excludes``, which
    are gitignore-style patterns relative to each directory given). Yields one result per
    ``.py`` file (and ``.ipynb`` notebook where nbformat is installed), in walk order;
    ``jobs`` > 1 analyses files in that many processes.

    ``settings_for(path)``: each file's own settings (its nearest ``[tool.offload-fixer]``):
    their target and JAX version replace ``target``/``jax_version``, and a file found in a
    directory is skipped when they exclude it. A directory that cannot be listed, a symlink
    loop, a FIFO or device named ``*.py``, and a file that is not Python text (binary, UTF-16,
    undecodable) each get a result with ``parse_error`` set: nothing is skipped in silence."""
    from offload_fixer.notebook import NotebookError, read_program_bytes

    default = (normalize_target(target), jax_compat.spelling(jax_version))
    paths = [os.fspath(p) for p in paths]
    explicit = {p for p in paths if not os.path.isdir(p)}
    roots = tuple(p for p in paths if os.path.isdir(p))
    project = Project(roots)
    pending: list = []
    for item in walk(paths, excludes):
        if isinstance(item, Unreadable):
            pending.append(StaticResult(item.path, parse_error=ParseError(item.path, 1, 1, item.reason)))
            continue
        path = item
        file_target, spelling = default
        if settings_for is not None:
            settings = settings_for(path)
            if path not in explicit and settings.is_excluded(path):
                continue
            file_target, spelling = normalize_target(settings.target), jax_compat.spelling(settings.jax_version)
        try:
            data = read_program_bytes(path)
        except OSError as exc:
            pending.append(StaticResult(path, parse_error=ParseError(path, 1, 1, f"cannot read: {exc.strerror or exc}")))
            continue
        except NotebookError as exc:
            pending.append(StaticResult(path, parse_error=ParseError(path, 1, 1, str(exc))))
            continue
        project.remember(path, data)
        pending.append((data, path, file_target, spelling))
    # Every file is read before any is selected: a host spelling in one module makes the
    # modules that import it candidates. A file that cannot hold a finding is still screened.
    pending = [item if isinstance(item, StaticResult) or project.selects(item[1], item[0])
               else _screened(item[0], item[1], compile_it=item[1] in explicit) for item in pending]
    candidates = [item for item in pending if isinstance(item, tuple)]
    if jobs <= 1 or len(candidates) < 2:
        for item in pending:
            yield _check(*item, None, project) if isinstance(item, tuple) else item
        return
    # forkserver: workers fork from a clean server, never from a caller that has JAX's threads
    # running (an LSP, a test run, `offload-fixer run`), which fork would risk deadlocking.
    context = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {id(item): pool.submit(_check_in_worker, *item, roots) for item in candidates}
        for item in pending:
            yield futures[id(item)].result() if isinstance(item, tuple) else item


def _screened(data: bytes, path: str, compile_it: bool) -> StaticResult:
    error = screen(data, path, compile_it)
    return StaticResult(path, parse_error=error, analysed=error is not None)


def screen(data: bytes, path: str, compile_it: bool = True) -> ParseError | None:
    """Why a file the prefilter rules out is still not Python source, if it is not: bytes
    that do not decode (binary, UTF-16, a wrong or unknown coding cookie), a NUL byte, or
    (``compile_it``) a syntax error CPython reports. Such a file cannot hold a finding, but
    it is reported rather than passed over in silence.

    Decoding runs at memory speed; compiling at about 12 MB/s, five times what the whole
    check of a tree costs (``benchmarks/static_check.py``), so only files named on the
    command line are compiled: those are the ones a user (or a pre-commit hook) asked about."""
    text, error = _decode(data, path)
    if error is not None or not compile_it:
        return error
    try:
        compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return ParseError(path, exc.lineno or 1, exc.offset or 1, exc.msg)
    except (RecursionError, MemoryError, ValueError) as exc:
        return ParseError(path, 1, 1, f"CPython cannot compile this file: {exc}")
    return None


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
    """One file; a tree too deep for the walks gets a file error of its own, never a traceback."""
    try:
        return call_allowing_deep_recursion(_check_once, source, path, target, spelling, cache, project)
    except RecursionError:
        return StaticResult(path, parse_error=ParseError(
            path, 1, 1, "nested too deeply for offload-fixer to analyse (Python's recursion limit)"), analysed=True)


def _check_once(source: str | bytes, path: str, target: str, spelling: jax_compat.Spelling,
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
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        # libcst may still parse syntax newer than this interpreter's; if not, CPython's
        # message and position are the ones users know.
        syntax_error = exc
    limit = _cpython_limit(syntax_error, path)
    if limit is not None:
        return StaticResult(path, parse_error=limit, analysed=True)
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


def _cpython_limit(error: BaseException | None, path: str) -> ParseError | None:
    """A file CPython cannot compile for its own limits (``too many nested parentheses``, an
    expression too deep for its compiler) rather than for syntax newer than this interpreter's:
    the program cannot run, so it is reported like a syntax error, even where libcst parses it."""
    if isinstance(error, (RecursionError, MemoryError)):
        return ParseError(path, 1, 1, f"CPython cannot compile this file: {error}")
    if isinstance(error, SyntaxError) and (error.msg or "").startswith("too many"):
        return ParseError(path, error.lineno or 1, error.offset or 1, error.msg)
    return None


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
    for jitted in interpreter.jit_sites():
        site = interpreter.analyse(jitted)
        if site is not None:
            found.extend(findings(site, spelling))
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
        return decode(data)[0], None
    except SourceDecodeError as exc:
        return "", ParseError(path, exc.line, exc.col, exc.message)
