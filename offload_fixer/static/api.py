"""Entry points of the static check: one source text, or files and directories.

Over 500 lines on purpose: the check's entry points share the process pool, the caches and
the screening of unparseable files.
"""

from __future__ import annotations

import ast
import functools
import os
import sys
import threading
from collections.abc import Callable, Collection, Generator, Iterable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from offload_fixer import jax_compat
from offload_fixer.batch_gc import collect_file_garbage, tune_for_batch
from offload_fixer.model import Diagnostic, normalize_target
from offload_fixer.recursion import call_allowing_deep_recursion
from offload_fixer.source.decoding import NOTEBOOK_SUFFIX, SourceDecodeError, decode, libcst_view, read_regular_file
from offload_fixer.source.python_version import (
    construct_start,
    grammar_of,
    judged_by_cpython,
    newer_syntax_message,
    older_target_message,
    only_newer_syntax,
    parses,
)
from offload_fixer.source.real_paths import is_directory

from .files import Unreadable, walk
from .incremental import Increment, statement_names
from .outline import Outline, SourceCache, outline
from .prefilter import checks_policy_alone, references_jit, spells_host
from .project import ModuleFacts, Project
from .reading import kept_result, notebook_facts, notebook_program, read_for_check, validated, validated_here
from .results import ParseError, StaticResult, internal_error_note
from .text_facts import TextFacts, folded

if TYPE_CHECKING:
    import multiprocessing.context

    import libcst

    from offload_fixer.config import Settings

    from .cache import ResultCache
    from .source import ParsedSource


LIBCST_LIMIT = (
    "libcst, the parser the check and its fixes use, cannot parse this file, which CPython compiles; not checked"
)

BYTES_PER_WORKER = 1 << 19
"""Source that passed the text prefilter per process when ``jobs`` is left to the check:
about a second of work (parsing, and resolving the project's modules it imports), against a
pool start of ~50 ms (fork) to ~0.6 s (forkserver, which imports the parser in each worker).
maxtext's 45 candidate files hold 1.7 MB: two processes check it in 5.7 s against 6.9 s for
one. Small trees have far less, and there one process is faster than a pool.
``benchmarks/static_check.py --compare-jobs`` measures it."""


def check_source(
    source: str | bytes,
    path: str = "<string>",
    target: str = "tpu",
    jax_version: str | None = None,
    cache: SourceCache | None = None,
    project: Project | None = None,
    require_syntax: bool = False,
    python: tuple[int, int] | None = None,
) -> StaticResult:
    """Check one file's text without importing or running it.

    ``jax_version`` picks the rules of that JAX release (default: the installed one);
    ``target`` is ``tpu`` or ``gpu`` and sets the severity. An editor passes
    the same :class:`SourceCache` for every version of a document, so that only the
    statements a change touched are parsed again; the result is the same without it.
    Imports of other modules of the project (next to ``path``, or in its package) are read
    from disk through ``project``, which keeps what it read between calls.
    ``require_syntax``: report a syntax error (:func:`screen`) even where the prefilter rules
    the text out. ``python``: the Python the text is written for (``Settings.python``), whose
    syntax decides (:mod:`~offload_fixer.source.python_version`).
    """
    target = normalize_target(target)
    spelling = jax_compat.spelling(jax_version)
    result = _check(source, path, target, spelling, cache, project or Project(), python)
    if require_syntax and not result.analysed:
        return StaticResult(path, parse_error=screen(source, path, python=python))
    return result


def check_paths(
    paths: Iterable[str],
    target: str = "tpu",
    jax_version: str | None = None,
    jobs: int | None = 1,
    excludes: Sequence[str] = (),
    check_syntax: Collection[str] = (),
    settings_for: Callable[[str], Settings] | None = None,
    *,
    caches: MutableMapping[str, SourceCache] | None = None,
    results: ResultCache | None = None,
    texts: Mapping[str, bytes] | None = None,
) -> Generator[StaticResult, None, None]:
    """Check files and directories (walked, honouring ``.gitignore`` and ``excludes``, which
    are patterns as in the ``exclude`` setting, relative to the current directory: one without
    ``/`` matches a name anywhere, one with ``/`` the path). Yields one result per
    ``.py`` file and ``.ipynb`` notebook, in walk order.
    ``jobs``: at most that many processes; 0 or ``None`` lets :func:`worker_count` decide. A
    file in ``check_syntax`` (a file named on the command line) is compiled even when the
    prefilter rules it out, so a syntax error in it is reported. ``caches``: a
    :class:`SourceCache` per path, filled and reused by the files checked in this process, so
    that checking again after a fix parses only the statements the fix changed. ``results``:
    the results of earlier runs (:class:`~offload_fixer.static.cache.ResultCache`), read for
    each file whose check they still answer, and written for each file checked anew. ``texts``: a
    file's content (a notebook's: its program) as fixed in memory, checked instead of the file
    (keyed by any spelling of its path).

    ``settings_for(path)``: each file's own settings (its nearest ``[tool.offload-fixer]``):
    their target and JAX version replace ``target``/``jax_version``, and a file or directory
    found in a walk is skipped when they exclude it (:func:`offload_fixer.config.is_excluded`,
    the one engine; files named in ``paths`` are checked). A directory that cannot be listed, a symlink
    loop, a FIFO or device named ``*.py``, and a file that is not Python text (binary, UTF-16,
    undecodable) each get a result with ``parse_error`` set: nothing is skipped in silence."""
    if jax_version is not None:
        jax_compat.check_modelled(jax_version)
    default = (normalize_target(target), jax_version)
    paths = [os.fspath(p) for p in paths]
    if texts:  # a walk spells a path as it goes (``./pkg/a.py``), a finding as it shows it
        texts = {os.path.abspath(path): data for path, data in texts.items()}
    roots = tuple(p for p in paths if is_directory(p))
    manifest = results.manifest() if results is not None else None
    project = Project(roots, snapshot=True, manifest=manifest)
    walked = _check_walked(paths, default, excludes, check_syntax, settings_for, caches, results, texts, project, jobs)
    del project  # the walk's alone: it lets the project go before a pool starts
    try:
        yield from walked
    finally:  # the facts this run computed, even where its caller stopped early
        if manifest is not None:
            manifest.save()


def _check_walked(
    paths: list[str],
    default: tuple[str, str | None],
    excludes: Sequence[str],
    check_syntax: Collection[str],
    settings_for: Callable[[str], Settings] | None,
    caches: MutableMapping[str, SourceCache] | None,
    results: ResultCache | None,
    texts: Mapping[str, bytes] | None,
    project: Project,
    jobs: int | None,
) -> Generator[StaticResult, None, None]:
    """:func:`check_paths` of a project."""
    from offload_fixer.config import is_excluded

    roots = project.roots
    manifest = project.manifest
    cwd = os.getcwd()

    def excluded(path: str) -> bool:
        return (bool(excludes) and is_excluded(path, excludes, cwd)) or (
            settings_for is not None and settings_for(path).is_excluded(path)
        )

    pending: list[StaticResult | tuple[TextFacts, str, str, str | None, tuple[int, int] | None]] = []
    for item in walk(paths, excluded):
        if isinstance(item, Unreadable):
            pending.append(StaticResult(item.path, parse_error=ParseError(item.path, 1, 1, item.reason, True)))
            continue
        path = item
        file_target, file_jax_version = default
        python = None
        if settings_for is not None:
            settings = settings_for(path)
            file_target, file_jax_version = normalize_target(settings.target), settings.jax_version
            python = settings.python
        try:
            if texts and os.path.abspath(path) in texts:
                data: bytes | TextFacts | StaticResult = texts[os.path.abspath(path)]
            elif path.endswith(NOTEBOOK_SUFFIX):
                data = notebook_program(path, results) if manifest is None else notebook_facts(path, results, manifest)
            elif manifest is not None:
                data = project.text_facts(path)
                if not data.known:  # nothing kept: read now, so that a file that cannot be read says so
                    data.give(read_regular_file(path))
            else:
                data = read_regular_file(path)
        except OSError as exc:
            data = StaticResult(path, parse_error=ParseError(path, 1, 1, f"cannot read: {exc.strerror or exc}", True))
        if isinstance(data, StaticResult):
            pending.append(data)
            continue
        if isinstance(data, bytes):
            project.remember(path, data)
            data = project.text_facts(path) if not path.endswith(NOTEBOOK_SUFFIX) else TextFacts(data)
        elif data.loaded and not path.endswith(NOTEBOOK_SUFFIX):
            project.remember(path, cast(bytes, data.data))
        pending.append((data, path, file_target, file_jax_version, python))
    # Every file is read before any is selected: a host spelling in one module makes the
    # modules that import it candidates. A file that cannot hold a finding is still screened.
    # The JAX version's spelling is looked up for candidates only (the installed version is
    # package metadata, which costs more to read than a tree without a candidate).
    spellings = functools.cache(jax_compat.spelling)
    selected: list[StaticResult | tuple[TextFacts, str, str, jax_compat.Spelling, tuple[int, int] | None]] = [
        entry
        if isinstance(entry, StaticResult)
        else (entry[0], entry[1], entry[2], spellings(entry[3]), entry[4])
        if _selects(project, entry[1], entry[0])
        else _unselected(entry[0], entry[1], check_syntax, entry[4])
        for entry in pending
    ]
    # A notebook is validated against nbformat's schema only where it is analysed: most of
    # the cost of reading one, spent on the few that can hold a finding. One analysed anew is
    # validated where it is checked (in a pool, by the worker that checks it, which alone
    # loads nbformat); one whose program an earlier run checked, here (its verdict is kept
    # by the notebook's bytes: an output may have changed, and made it invalid).
    unvalidated = {
        entry[1]
        for entry in selected
        if isinstance(entry, tuple)
        and entry[1].endswith(NOTEBOOK_SUFFIX)
        and not (texts and os.path.abspath(entry[1]) in texts)
    }
    if results is not None:  # what an earlier run found, where it still holds
        selected = [
            entry if isinstance(entry, StaticResult) else kept_result(entry, results, project, entry[1] in unvalidated)
            for entry in selected
        ]
    checked = [read_for_check(entry, project) if isinstance(entry, tuple) else entry for entry in selected]
    candidates = [entry for entry in checked if isinstance(entry, tuple)]
    recording = results is not None
    workers = worker_count(jobs, len(candidates), sum(len(entry[0]) for entry in candidates))
    if workers <= 1:
        for entry in checked:
            if isinstance(entry, tuple) and entry[1] in unvalidated:
                entry = validated(entry, results)
            if not isinstance(entry, tuple):
                yield entry
                continue
            cache = caches.setdefault(entry[1], SourceCache()) if caches is not None else None
            result, digests = _check_consulting(*entry, cache, project, recording)
            collect_file_garbage()
            if results is not None and digests is not None:
                results.put(*entry, result, digests)
            yield result
        return
    import concurrent.futures  # a pool's machinery (multiprocessing, pickle, sockets) only for a pool

    # The workers check from their arguments and read the project's modules themselves: the
    # bytes of every file the prefilter ruled out (four fifths of a tree's) are let go before
    # the pool starts, rather than copied into each worker's memory (8 MB of axlearn's 11).
    del pending, project
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context()) as pool:
        # The largest files first: a worker that takes the last big file as the others finish
        # would leave the run waiting on it alone.
        futures = {
            id(entry): pool.submit(_check_in_worker, *entry, roots, recording, entry[1] in unvalidated)
            for entry in sorted(candidates, key=lambda entry: -len(entry[0]))
        }
        try:
            for entry in checked:
                if not isinstance(entry, tuple):
                    yield entry
                    continue
                verdict = None
                try:
                    result, digests, verdict = futures[id(entry)].result()
                except Exception as exc:  # noqa: BLE001 (a worker that died: this file's note, the others reported)
                    result, digests = (
                        StaticResult(entry[1], analysed=True, internal_error=internal_error_note(entry[1], exc)),
                        None,
                    )
                if results is not None and verdict is not None:  # the next run need not validate it
                    results.keep_verdict(entry[1], *verdict)
                if results is not None and digests is not None:
                    results.put(*entry, result, digests)
                yield result
        finally:  # a caller that stops early: drop what has not started, wait for the rest
            for future in futures.values():
                future.cancel()


def _selects(project: Project, path: str, data: TextFacts) -> bool:
    """:meth:`Project.selects`; a failure there selects the file, so that its check reports it
    as an internal error of that file (:func:`_check`) and every other file is still checked."""
    try:
        return project.selects(path, data)
    except Exception:  # noqa: BLE001
        return True


def worker_count(jobs: int | None, candidates: int, size: int) -> int:
    """Processes for ``candidates`` files (``size`` bytes) that passed the text prefilter:
    ``jobs`` > 0 caps them; otherwise one per :data:`BYTES_PER_WORKER`. Never more than the
    cores this process may run on (:func:`available_cores`), whoever asks: a second process
    on one core only adds its start-up. The load average is not consulted: it counts work
    that has cores of its own, and on a busy machine it left one process where two were
    faster (``benchmarks/static_check.py --compare-jobs``)."""
    if candidates < 2:
        return 1
    limit = min(available_cores(), candidates)
    if jobs:
        return max(1, min(jobs, limit))
    return max(1, min(limit, size // BYTES_PER_WORKER))


def available_cores() -> int:
    """The cores this process may run on: its CPU affinity (a container's or ``taskset``'s
    share), not every core of the machine."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _pool_context() -> multiprocessing.context.BaseContext:
    """fork from a single-threaded caller (the CLI): workers start in milliseconds with the
    parser already imported, and leave no server process behind. A caller with threads
    running (an editor's language server, a test run, a process that imported JAX) would
    risk a deadlock in the forked child, so it gets forkserver, whose workers fork from a
    clean server."""
    import multiprocessing

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


def _unselected(
    data: TextFacts, path: str, check_syntax: Collection[str], python: tuple[int, int] | None = None
) -> StaticResult:
    """A file the prefilter rules out: still screened (:func:`screen`), compiled too when it
    was named on the command line (the verdict kept with the file's facts)."""
    compile_it = path in check_syntax

    def screened(data: bytes) -> tuple[int, int, str] | None:
        error = screen(data, path, compile_it=compile_it, python=python)
        return None if error is None else (error.line, error.col, error.message)

    found = data.screened(f"{compile_it}:{python}", screened)
    error = None if found is None else ParseError(path, *found)
    return StaticResult(path, parse_error=error, analysed=error is not None)


def screen(
    source: str | bytes, path: str, compile_it: bool = True, python: tuple[int, int] | None = None
) -> ParseError | None:
    """Why a file the prefilter rules out is still not Python source, if it is not: bytes
    that do not decode (binary, UTF-16, a wrong or unknown coding cookie), a NUL byte, or
    (``compile_it``) a syntax error CPython reports, or a limit of CPython's compiler. Such a
    file cannot hold a finding, but it is reported rather than passed over in silence.
    Syntax newer than this interpreter's is Python where the file's target (``python``,
    :mod:`~offload_fixer.source.python_version`) is newer too, or not set.

    Decoding runs at memory speed; compiling at about 12 MB/s, five times what the whole
    check of a tree costs (``benchmarks/static_check.py``), so only files named on the
    command line are compiled: those are the ones a user (or a pre-commit hook) asked about."""
    if isinstance(source, bytes):
        text, error = _decode(source, path)
        if error is not None or not compile_it:
            return error
    elif not compile_it:
        return None
    else:
        text = source
    try:
        compile(text, path, "exec", dont_inherit=True)
        if grammar_of(python) is not None:
            ast.parse(text, feature_version=grammar_of(python))
    except SyntaxError as exc:
        return _syntax_error(exc, text, path, python)
    except (RecursionError, MemoryError, ValueError) as exc:
        return ParseError(path, 1, 1, f"CPython cannot compile this file: {exc}")
    return None


_WORKER_PROJECTS: dict[tuple[str, ...], Project] = {}


def _check_in_worker(
    source: bytes,
    path: str,
    target: str,
    spelling: jax_compat.Spelling,
    python: tuple[int, int] | None,
    roots: tuple[str, ...],
    recording: bool,
    validate: bool,
) -> tuple[StaticResult, dict[str, str] | None, tuple[str, str | None] | None]:
    """One file in a worker process, which keeps one project per set of roots for all its
    files; ``validate``: a notebook, validated first (:func:`.reading.validated`), and nbformat's
    verdict returned with the SHA-256 of the bytes it judged, for the parent to keep."""
    verdict = None
    if validate:
        checked, verdict = validated_here(path)
        if checked is not None:
            return checked, None, verdict
    project = _WORKER_PROJECTS.get(roots)
    if project is None:
        if not _WORKER_PROJECTS:
            tune_for_batch()
        project = _WORKER_PROJECTS[roots] = Project(roots, snapshot=True)
    try:
        return (*_check_consulting(source, path, target, spelling, python, None, project, recording), verdict)
    finally:
        collect_file_garbage()


def _check_consulting(
    source: bytes,
    path: str,
    target: str,
    spelling: jax_compat.Spelling,
    python: tuple[int, int] | None,
    cache: SourceCache | None,
    project: Project,
    recording: bool,
) -> tuple[StaticResult, dict[str, str] | None]:
    """One file, and (``recording``) digests of what its check read from the disk, for the
    result cache: the result holds while they are unchanged."""
    if not recording:
        return _check(source, path, target, spelling, cache, project, python), None
    with project.consulting() as consulted:
        result = _check(source, path, target, spelling, cache, project, python)
    return result, project.digests(consulted)


def _check(
    source: str | bytes,
    path: str,
    target: str,
    spelling: jax_compat.Spelling,
    cache: SourceCache | None,
    project: Project,
    python: tuple[int, int] | None = None,
) -> StaticResult:
    """One file; a tree too deep for the walks gets a file error of its own, and a failure of
    the check an internal-error note of its own, never a traceback."""
    try:
        return call_allowing_deep_recursion(_check_once, source, path, target, spelling, cache, project, python)
    except RecursionError:
        return StaticResult(
            path,
            parse_error=ParseError(
                path, 1, 1, "nested too deeply for offload-fixer to analyse (Python's recursion limit)"
            ),
            analysed=True,
        )
    except Exception as exc:  # noqa: BLE001 (a bug of the check: this file's note, never the run's traceback)
        return StaticResult(path, analysed=True, internal_error=internal_error_note(path, exc))


def _check_once(
    source: str | bytes,
    path: str,
    target: str,
    spelling: jax_compat.Spelling,
    cache: SourceCache | None,
    project: Project,
    python: tuple[int, int] | None = None,
) -> StaticResult:
    data = source if isinstance(source, bytes) else source.encode("utf-8", "surrogatepass")
    if not project.selects(path, data):
        return StaticResult(path)
    if cache is not None:
        cache.begin()
    if isinstance(source, bytes):
        decoded, error = _decode(source, path)
        if error is not None:
            return StaticResult(path, parse_error=error, analysed=True)
        text = decoded
    else:
        text = source
    original, text = text, libcst_view(text)  # form feeds in indentation cut, as CPython counts them
    syntax_error = None
    found = None
    # In a run, a checked file that an earlier checked file imported is read once: its outline,
    # its parsed statements and what they tell are the project's (the same bytes, parsed
    # alike). The others are not kept for the run: their trees would only weigh on the rest.
    grammar = grammar_of(python)
    newer_syntax = not judged_by_cpython(python)  # libcst's grammar judges: 3.12's syntax read under 3.11
    shared = (
        project.known_facts(path)
        if cache is None and project.snapshot and not path.startswith("<") and project.reads_as(path, data)
        else None
    )
    try:
        found = (
            outline(text, cache, grammar, newer_syntax)
            if shared is None
            or grammar is not None
            or shared.outline.compacted
            or (shared.outline.newer_syntax and not newer_syntax)
            else shared.outline
        )
        if shared is not None and shared.outline.spans != found.spans:
            shared = None  # the project's own parse cut it otherwise: nothing shared
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        # libcst may still parse syntax newer than this interpreter's; if not, CPython's
        # message and position are the ones users know.
        syntax_error = exc
    limit = _cpython_limit(syntax_error, path)
    if limit is not None:
        return StaticResult(path, parse_error=limit, analysed=True)
    if isinstance(syntax_error, SyntaxError) and judged_by_cpython(python):
        # the file is written for this interpreter's Python or an older one: CPython decides
        return StaticResult(path, parse_error=_syntax_error(syntax_error, text, path, python), analysed=True)
    names_jit = found is not None and references_jit(found.tree)
    words = folded(data)  # as Python reads names
    if found is not None and not names_jit and not checks_policy_alone(words) and not spells_host(words):
        return StaticResult(path, analysed=True)
    import hashlib

    digest = hashlib.sha256(data).hexdigest()
    if (cache is None or cache.on_demand) and found is not None and found.spans is not None:
        # Only the statements the check looks at are parsed (:mod:`.candidates`; offload
        # policies: :func:`.policies.unpinned_policies_by_statement`); a document's cache keeps
        # them, and what each statement found (:mod:`.incremental`).
        from .scopes import NotCut

        chunks = cache if cache is not None else None if shared is None else shared.cache
        facts = ModuleFacts(path, data, text, found, chunks, digest)
        if shared is not None:
            facts.memo = shared.memo
        try:
            diagnostics, dependencies = _analyse(
                facts,
                text,
                path,
                target,
                spelling,
                digest,
                project,
                found,
                cache,
                prune=cache is None,
                search_sites=names_jit,
            )
        except NotCut:  # a statement that does not parse alone: the whole text is parsed below
            pass
        else:
            if original != text:
                diagnostics = _columns_of(original, text, path, diagnostics)
            return StaticResult(path, tuple(diagnostics), analysed=True, dependencies=dependencies)
        finally:
            if shared is None and cache is None:
                facts.release()

    import libcst as cst

    from .source import parse_source

    try:
        parsed = parse_source(text, found, cache)
    except cst.ParserSyntaxError as exc:
        if syntax_error is None and found is not None and found.newer_syntax:
            syntax_error = _refusal(text)  # the outline read a twin of the text: CPython's word
        if isinstance(syntax_error, SyntaxError):
            error = ParseError(path, syntax_error.lineno or 1, syntax_error.offset or 1, syntax_error.msg)
        else:  # CPython compiles it: a limit of libcst's parser (5,000 implicitly joined strings)
            detail = " ".join(exc.message.split())
            error = ParseError(path, exc.raw_line, exc.raw_column + 1, f"{LIBCST_LIMIT} ({detail})")
        return StaticResult(path, parse_error=error, analysed=True)
    diagnostics, dependencies = _analyse(parsed, text, path, target, spelling, digest, project, found, cache)
    if original != text:
        diagnostics = _columns_of(original, text, path, diagnostics)
    return StaticResult(path, tuple(diagnostics), analysed=True, dependencies=dependencies)


def _syntax_error(exc: SyntaxError, text: str, path: str, python: tuple[int, int] | None) -> ParseError | None:
    """What CPython's refusal means for a file written for ``python``: syntax of a newer Python
    that libcst's grammar reads is no error where the target is newer than this interpreter
    (or not set); where the target is a Python this interpreter covers, it is, and it says so."""
    if only_newer_syntax(exc, text):
        if not judged_by_cpython(python):
            return None
        assert python is not None
        return ParseError(path, exc.lineno or 1, exc.offset or 1, newer_syntax_message(exc.msg, python))
    if python is not None and grammar_of(python) is not None and parses(text):  # only the target's grammar refuses it
        return ParseError(path, *construct_start(text, exc), older_target_message(exc.msg, python))
    return ParseError(path, exc.lineno or 1, exc.offset or 1, exc.msg)


def _columns_of(original: str, view: str, path: str, diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """The diagnostics of ``view`` (:func:`libcst_view` of ``original``) with the columns of
    ``original``: a line whose form feeds the view cut starts that much later in the file, and
    a name the view spells folded may be longer or shorter in the file (``ﬁ`` for ``fi``)."""
    import dataclasses

    from offload_fixer.source.decoding import split_lines, view_column

    lines = {
        number: (line, cut)
        for number, (line, cut) in enumerate(zip(split_lines(original), split_lines(view)), 1)
        if line != cut
    }

    def column(line: int, col: int) -> int:
        return view_column(*lines[line], col - 1) + 1 if line in lines else col

    def moved(span):
        if span is None or span.path != path or not (span.line in lines or span.end_line in lines):
            return span
        end = column(span.end_line or span.line, span.end_col) if span.end_col is not None else None
        return dataclasses.replace(span, col=column(span.line, span.col), end_col=end)

    return [
        dataclasses.replace(
            d,
            span=moved(d.span),
            return_span=moved(d.return_span),
            origin=dataclasses.replace(d.origin, span=moved(d.origin.span)) if d.origin else None,
            trace=tuple(dataclasses.replace(step, span=moved(step.span)) for step in d.trace),
        )
        for d in diagnostics
    ]


def _refusal(text: str) -> SyntaxError | None:
    """What this interpreter's ``ast`` says of ``text``: its ``SyntaxError``, if any."""
    try:
        ast.parse(text)
    except SyntaxError as exc:
        return exc
    except (ValueError, RecursionError, MemoryError):
        return None
    return None


def _cpython_limit(error: BaseException | None, path: str) -> ParseError | None:
    """A file CPython cannot compile for its own limits (``too many nested parentheses``, an
    expression too deep for its compiler) rather than for syntax newer than this interpreter's:
    the program cannot run, so it is reported like a syntax error, even where libcst parses it."""
    if isinstance(error, (RecursionError, MemoryError)):
        return ParseError(path, 1, 1, f"CPython cannot compile this file: {error}")
    if isinstance(error, SyntaxError) and (error.msg or "").startswith("too many"):
        return ParseError(path, error.lineno or 1, error.offset or 1, error.msg)
    return None


def _analyse(
    parsed: ParsedSource | libcst.Module | ModuleFacts,
    text: str,
    path: str,
    target: str,
    spelling: jax_compat.Spelling,
    source_sha256: str | None = None,
    project: Project | None = None,
    found_outline: Outline | None = None,
    cache: SourceCache | None = None,
    prune: bool = False,
    search_sites: bool = True,
) -> tuple[list[Diagnostic], tuple[str, ...]]:
    """Diagnostics of a parsed text (a module parsed whole is located statement by statement),
    and the other modules of the project read for them. With the ``cache`` of a document and
    the outline its statements were cut by, only the statements a change affects are
    analysed again (:mod:`.incremental`); the findings are the same. A text given by its
    :class:`ModuleFacts` is parsed statement by statement as the check reads it, and
    searched for jit sites only in the statements that can hold one a host value reaches
    (:func:`.candidates.site_candidates`) and for offload policies only in those that can name
    one (:func:`.policies.unpinned_policies_by_statement`); raises :class:`~.scopes.NotCut`
    when one of those does not parse alone. With a document's cache too, a statement a change
    may affect is analysed again only where a host value can reach it; the others find
    nothing, whether or not they were ever parsed. ``search_sites`` False: a text that names none of
    JAX's jits (:func:`.prefilter.references_jit`), read for its code outside any jit alone,
    is not searched for jit sites (as a text ruled out by the prefilter is not)."""
    from .interpreter import Interpreter
    from .rules import diagnostics, eager_findings, findings
    from .source import ParsedSource, Sources

    importer = None if path.startswith("<") else path
    increment = None
    consulted: dict[str, Any] = {}  # project modules read to rule statements out: their stamps count too
    eager: list[int] | None
    tests: dict[int, frozenset[str]] | None = None
    if isinstance(parsed, ModuleFacts):
        from .candidates import site_candidates
        from .policies import unpinned_policies_by_statement, untagged_names_by_statement

        interpreter = Interpreter(parsed, text, None, project, importer, spelling.regime)
        assert interpreter.lazy is not None
        if cache is None or project is None:
            if prune:
                from .statement_reads import keep_jit_groups_only

                keep_jit_groups_only(parsed)
            indices: list[int] | None = site_candidates(parsed, project, importer) if search_sites else []
            eager, tests = _eager_roots(parsed, project, importer)
            if prune and (indices or eager):
                parsed.pruned = _pruned(parsed, project, importer, indices or [], eager, tests)
        else:
            # Of the statements a change may affect, those a host value can reach; the others
            # find nothing (kept so), parsed only where an analysed one reads them.
            increment = _increment_by_chunk(parsed, cache, (path, target, spelling), project)
            with project.consulting() as asked:
                indices = site_candidates(parsed, project, importer, increment.dirty) if search_sites else []
                eager, tests = _eager_roots(parsed, project, importer, increment.dirty)
                if indices or eager:
                    # As ``check`` prunes: a class is cut down by what every candidate reads
                    # (those of a document just opened, every statement of which is dirty).
                    if len(increment.dirty) == len(parsed.outline.groups):
                        parsed.pruned = _pruned(parsed, project, importer, indices, eager, tests)
                    else:
                        every_site = site_candidates(parsed, project, importer) if search_sites else []
                        parsed.pruned = _pruned(
                            parsed, project, importer, every_site, *_eager_roots(parsed, project, importer)
                        )
            project.note(asked)
            own = os.path.abspath(path)
            consulted = dict.fromkeys(p for p in asked.files if os.path.abspath(p) != own)
        # After the pruning: the statements that name a policy spell it, so they are kept.
        policies = unpinned_policies_by_statement(interpreter.lazy, text, path, target, source_sha256)
        policies += untagged_names_by_statement(interpreter.lazy, text, path, target, source_sha256)
    else:
        from .policies import unpinned_policies, untagged_names

        if not isinstance(parsed, ParsedSource):
            parsed = ParsedSource(parsed)
        policies = unpinned_policies(parsed, text, path, target, source_sha256)
        policies += untagged_names(parsed, text, path, target, source_sha256)
        interpreter = Interpreter(parsed.module, text, parsed.memos(), project, importer, spelling.regime)
        increment = _increment(parsed, found_outline, cache, interpreter, (path, target, spelling), project)
        indices = None if increment is None else increment.dirty
        eager = indices
    fresh: dict[int, list] = {}
    if increment is not None:
        fresh.update((index, []) for index in increment.dirty)
    for index, sites in interpreter.jit_sites_by_statement(indices).items():
        fresh[index] = []
        for jitted in sites:
            site = interpreter.analyse(jitted)
            if site is not None:
                fresh[index].extend(findings(site, spelling))
    # The code outside any jit, once every jit site is analysed (its module-level names are
    # then evaluated as eager code does).
    eager_indices = range(interpreter.statement_count) if eager is None else eager
    for index, (operations, called) in interpreter.eager_by_statement(eager_indices, tests).items():
        found_here = fresh.setdefault(index, [])
        found_here.extend(eager_findings(operations))
        for site in called:
            found_here.extend(findings(site, spelling))
    foreign: dict[str, Any] = {p: scope for p, scope in interpreter.foreign.items() if scope is not None}
    foreign.update((p, None) for p in consulted if p not in foreign)
    primary: ParsedSource | None = None
    if increment is None:
        found = [f for index in sorted(fresh) for f in fresh[index]]
    else:
        found = increment.findings(fresh)
        assert cache is not None and project is not None, "an increment is planned with both"
        body = None
        if interpreter.lazy is not None:
            body, primary = _chunks_read(interpreter.lazy, increment)
        kept = increment.keep(fresh, {p: (project.stamp(p), scope) for p, scope in foreign.items()}, body)
        cache.analysis = kept
        if isinstance(parsed, ModuleFacts):
            _keep_derived(parsed, cache, increment.ids)
        if body is not None:
            cache.trim(len(body))
        foreign.update((p, scope) for p, (_, scope) in kept.foreign.items() if p not in foreign)
    dependencies = tuple(foreign)
    if not found:
        return policies, dependencies
    # Positions cost about three parses: only the statements that findings name pay for them.
    others = [
        (_display_path(p, path), scope.source(), scope.facts.sha256)
        for p, scope in foreign.items()
        if scope is not None
    ]
    if primary is None:
        primary = interpreter.lazy.source() if interpreter.lazy is not None else cast(ParsedSource, parsed)
    sources = Sources(primary, path, others, source_sha256)
    return diagnostics(found, sources, target, spelling) + policies, dependencies


def _eager_roots(
    facts: ModuleFacts, project: Project | None, importer: str | None, among: Sequence[int] | None = None
) -> tuple[list[int], dict[int, frozenset[str]]]:
    """The statement groups whose code outside any jit a host value can reach (of ``among``
    when given), and of each class among them, the test methods it reaches (a class none of
    whose test methods it reaches is left out: libcst never parses it for its eager code)."""
    from .candidates import eager_candidates
    from .pruning import reached_tests

    eager = eager_candidates(facts, project, importer, among)
    tests = reached_tests(facts, project, importer, eager)
    return [index for index in eager if tests.get(index) != frozenset()], tests


def _pruned(
    facts: ModuleFacts,
    project: Project | None,
    importer: str | None,
    sites: Sequence[int],
    eager: Sequence[int],
    tests: Mapping[int, frozenset[str]],
) -> dict[int, str]:
    """The candidates' texts with what no candidate reads blanked (:func:`.pruning.pruned_pieces`):
    a test case's class read for its eager code alone keeps only the tests a host value reaches."""
    from .candidates import opaque_classes
    from .pruning import pruned_pieces

    eager_only = [index for index in eager if index in tests and index not in set(sites)]
    opaque = opaque_classes(facts, project, importer, eager_only) if eager_only else set()
    tests_only = {index: tests[index] for index in eager_only if index in opaque}
    return pruned_pieces(facts, project, importer, sorted({*sites, *eager}), tests_only)


def _increment(
    parsed: ParsedSource,
    found_outline: Outline | None,
    cache: SourceCache | None,
    interpreter: Any,
    context: tuple,
    project: Project | None,
) -> Increment | None:
    """The plan of an incremental analysis, for a text assembled from a document's cached
    chunks; None for a text parsed whole."""
    memos = parsed.memos()
    if cache is None or project is None or memos is None or found_outline is None:
        return None
    groups = found_outline.groups
    body = parsed.module.body
    if len(groups) != len(body):
        return None
    names = []
    for memo, group in zip(memos, groups):
        known = memo.get("names")
        if known is None:
            known = memo["names"] = statement_names(group)
        names.append(known)
    context = (*context, frozenset(interpreter.module_scope.unknown))
    return Increment(body, names, cache.analysis, context, project.stamp)


def _increment_by_chunk(facts: ModuleFacts, cache: SourceCache, context: tuple, project: Project) -> Increment:
    """The plan of an incremental analysis of a text read statement by statement: each
    statement is known by its chunk's key in the cache (its text, whether it starts the file,
    its occurrence), whether or not it was ever parsed."""
    keys: list[tuple] = []
    seen: dict[str, int] = {}
    for index, piece in enumerate(facts.pieces()):
        occurrence = seen.get(piece, 0)
        seen[piece] = occurrence + 1
        keys.append((piece, index == 0, occurrence))
    names = []
    for key, group in zip(keys, facts.outline.groups):
        known = cache.names.get(key)
        names.append(statement_names(group) if known is None else known)
    cache.names = dict(zip(keys, names))
    cache.begin(frozenset(keys))  # the chunks of the statements a change replaced are free
    _take_derived(facts, cache, keys)
    context = (*context, "by chunk", facts.mutated_globals)
    return Increment([None] * len(keys), names, cache.analysis, context, project.stamp, ids=keys)


def _take_derived(facts: ModuleFacts, cache: SourceCache, keys: Sequence[tuple]) -> None:
    """What the last version's check read of the statement groups this version's outline kept
    (:class:`~.statement_reads.Group`), put in the facts' memo: the candidates of every version
    are decided over all groups, and an edit changes one."""
    from .statement_reads import GROUPS

    if facts.outline.compacted:
        return
    groups = facts.memo.setdefault(GROUPS, {})
    for index, key in enumerate(keys):
        held = cache.derived.get(key)
        if held is not None and held[0] is facts.outline.groups[index][0]:
            groups[index] = held[1]


def _keep_derived(facts: ModuleFacts, cache: SourceCache, keys: Sequence[tuple]) -> None:
    """What this check read of each statement group, kept in ``cache`` for the next version."""
    from .statement_reads import GROUPS

    if facts.outline.compacted:
        return
    groups = facts.memo.get(GROUPS, {})
    cache.derived = {key: (facts.outline.groups[i][0], groups[i]) for i, key in enumerate(keys) if i in groups}


def _chunks_read(scope: Any, increment: Increment) -> tuple[list, ParsedSource]:
    """The libcst chunks of each statement that findings may name: the one parsed now, and
    for a statement not analysed again those kept with it (a chunk the cache let go and
    parsed again is another tree, and kept findings name the nodes of the one they were
    found in); and the source of all of them, for the positions of the findings."""
    from .source import ParsedSource

    dirty = set(increment.dirty)
    body: list[tuple] = []
    pieces: list[tuple[int, Any]] = []
    for index in range(len(increment.ids)):
        held = () if index in dirty else increment.kept_node(index) or ()
        chunks = tuple(dict.fromkeys(c for c in (scope.chunks.get(index), *held) if c is not None))
        body.append(chunks)
        if chunks:
            offset = scope.facts.line_offset(index)
            pieces.extend((offset, chunk) for chunk in chunks)
    return body, ParsedSource(None, pieces)


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
