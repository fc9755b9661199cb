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
from offload_fixer.model import TARGETS, Diagnostic
from offload_fixer.recursion import call_allowing_deep_recursion
from offload_fixer.source.text import SourceDecodeError, decode, read_regular_file

from .files import Unreadable, walk
from .outline import SourceCache, outline
from .prefilter import may_hold_host_move, references_jit

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


def check_source(source: str | bytes, path: str = "<string>", target: str = "tpu",
                 jax_version: str | None = None, cache: SourceCache | None = None) -> StaticResult:
    """Check one file's text without importing or running it.

    ``jax_version`` picks the rules of that JAX release (default: the installed one);
    ``target`` is ``tpu``, ``gpu`` or ``gpu-legacy`` and sets the severity. An editor passes
    the same :class:`SourceCache` for every version of a document, so that only the
    statements a change touched are parsed again; the result is the same without it.
    """
    spelling = _spelling(target, jax_version)
    return _check(source, path, target, spelling, cache)


def check_paths(paths: Iterable[str], target: str = "tpu", jax_version: str | None = None,
                jobs: int = 1, excludes: Sequence[str] = (),
                settings_for: Callable[[str], Settings] | None = None) -> Iterator[StaticResult]:
    """Check files and directories (walked, honouring ``.gitignore`` and ``excludes``, which
    are gitignore-style patterns relative to each directory given). Yields one result per
    ``.py`` file, in walk order; ``jobs`` > 1 analyses files in that many processes.

    ``settings_for(path)``: each file's own settings (its nearest ``[tool.offload-fixer]``):
    their target and JAX version replace ``target``/``jax_version``, and a file found in a
    directory is skipped when they exclude it. A directory that cannot be listed, a symlink
    loop, a FIFO or device named ``*.py``, and a file that is not Python text (binary, UTF-16,
    undecodable) each get a result with ``parse_error`` set: nothing is skipped in silence."""
    default = (target, _spelling(target, jax_version))
    explicit = {os.fspath(p) for p in paths if not os.path.isdir(p)}
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
            file_target, spelling = settings.target, _spelling(settings.target, settings.jax_version)
        try:
            data = read_regular_file(path)
        except OSError as exc:
            pending.append(StaticResult(path, parse_error=ParseError(path, 1, 1, f"cannot read: {exc.strerror or exc}")))
            continue
        if may_hold_host_move(data):
            pending.append((data, path, file_target, spelling))
        else:
            error = screen(data, path, compile_it=path in explicit)
            pending.append(StaticResult(path, parse_error=error, analysed=error is not None))
    candidates = [item for item in pending if isinstance(item, tuple)]
    if jobs <= 1 or len(candidates) < 2:
        for item in pending:
            yield _check(*item) if isinstance(item, tuple) else item
        return
    # forkserver: workers fork from a clean server, never from a caller that has JAX's threads
    # running (an LSP, a test run, `offload-fixer run`), which fork would risk deadlocking.
    context = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {id(item): pool.submit(_check, *item) for item in candidates}
        for item in pending:
            yield futures[id(item)].result() if isinstance(item, tuple) else item


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


def _spelling(target: str, jax_version: str | None) -> jax_compat.Spelling:
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    return jax_compat.spelling(jax_version)


def _check(source: str | bytes, path: str, target: str, spelling: jax_compat.Spelling,
           cache: SourceCache | None = None) -> StaticResult:
    """One file; a tree too deep for the walks gets a file error of its own, never a traceback."""
    try:
        return call_allowing_deep_recursion(_check_once, source, path, target, spelling, cache)
    except RecursionError:
        return StaticResult(path, parse_error=ParseError(
            path, 1, 1, "nested too deeply for offload-fixer to analyse (Python's recursion limit)"), analysed=True)


def _check_once(source: str | bytes, path: str, target: str, spelling: jax_compat.Spelling,
                cache: SourceCache | None) -> StaticResult:
    text = source
    if isinstance(source, bytes):
        text, error = _decode(source, path)
        if error is not None:
            return StaticResult(path, parse_error=error, analysed=True)
    if not may_hold_host_move(text):
        return StaticResult(path)
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
    digest = hashlib.sha256(source if isinstance(source, bytes) else source.encode("utf-8")).hexdigest()
    return StaticResult(path, tuple(_analyse(parsed, text, path, target, spelling, digest)), analysed=True)


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
             source_sha256: str | None = None) -> list[Diagnostic]:
    """Diagnostics of a parsed text (a module parsed whole is located statement by statement)."""
    from .interpreter import Interpreter
    from .rules import diagnostics, findings
    from .source import ParsedSource

    from .policies import unpinned_policies

    if not isinstance(parsed, ParsedSource):
        parsed = ParsedSource(parsed)
    policies = unpinned_policies(parsed, text, path, target, source_sha256)
    interpreter = Interpreter(parsed.module, text, parsed.memos())
    found = []
    for jitted in interpreter.jit_sites():
        site = interpreter.analyse(jitted)
        if site is not None:
            found.extend(findings(site, spelling))
    if not found:
        return policies
    # Positions cost about three parses: only the statements that findings name pay for them.
    return diagnostics(found, parsed, path, target, spelling, source_sha256) + policies


def _decode(data: bytes, path: str) -> tuple[str, ParseError | None]:
    """Decode like Python does (BOM, PEP 263 cookie, else UTF-8), reporting where it fails."""
    try:
        return decode(data)[0], None
    except SourceDecodeError as exc:
        return "", ParseError(path, exc.line, exc.col, exc.message)
