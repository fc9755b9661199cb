"""Apply fix plans to files: new text, a unified diff, and (when asked) a write that keeps the file.

Per file: refuse it if its content changed since the analysis (sha256), decode it with its
own encoding, run every plan's codemod on the statements the fixes need (an excerpt of the
file, :mod:`offload_fixer.fixes.excerpt`) until a pass changes nothing (capped), take only the
lines the fixes changed from libcst's print and splice them into the original text (every
other byte, line ends, cookie and BOM included, is the file's own), check that the changed
statements parse and compile, and only then write it (:func:`~offload_fixer.fixes.writing.write_source`: a rename that keeps
owner, group, mode and attributes, or in place for a file with other hard links). A file
that fails gets a :class:`FileResult` with ``error`` set and the other files still go through.
A notebook is fixed as its code cells' program; the result goes back into the edited
cells' sources only (``offload_fixer.notebook.fixing``), and its diff is shown per cell.
"""

from __future__ import annotations

import ast
import copy
import difflib
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.codemod import CodemodContext

from offload_fixer.code_style import CodeStyle, code_style_for
from offload_fixer.codemods.fix_command import FixCommand
from offload_fixer.codemods.source_facts import SourceFacts
from offload_fixer.codemods.targets import FunctionTarget
from offload_fixer.fixes.errors import (
    FixError,
    FixNotConvergedError,
    FixVerificationError,
    SourceSyntaxError,
)
from offload_fixer.fixes.excerpt import Excerpt, FileOutline
from offload_fixer.fixes.introduced_names import unbound_reads
from offload_fixer.fixes.layout import wrap_long_lines
from offload_fixer.fixes.no_ops import no_op_statements
from offload_fixer.fixes.plan_sources import Job
from offload_fixer.fixes.planner import FixPlan
from offload_fixer.fixes.scope import WriteScope
from offload_fixer.fixes.source_io import check_fresh, decode_source_with_encoding, read_source
from offload_fixer.fixes.splice import restore
from offload_fixer.fixes.writing import write_source as write_source  # patched by tests where a fix writes
from offload_fixer.notebook import is_notebook
from offload_fixer.notebook.fixing import edit_notebook
from offload_fixer.recursion import call_allowing_deep_recursion
from offload_fixer.source.decoding import decode, encode, libcst_view, split_lines
from offload_fixer.source.diffs import unified_diff
from offload_fixer.source.python_version import compile_any_version, only_newer_syntax
from offload_fixer.static.pruning import BLANKED_LINE

MAX_PASSES = 6
"""Passes over one file before giving up; fixes settle in two (fix, then no-op), one more
for each further target that edits a node another target edited."""

_recent_fixes: OrderedDict[tuple[object, ...], tuple[str, int]] = OrderedDict()
""":func:`fix_text`'s latest answers, by all they depend on: a run asks for one fix several
times (``[*]`` verified by lowering it, ``--confirm`` compiling it, ``--fix`` writing it)."""
_recent_fixes_lock = threading.Lock()


@dataclass(frozen=True)
class FileResult:
    path: str
    old_text: str
    new_text: str
    diff: str
    applied: tuple[FixPlan, ...] = ()
    skipped: tuple[tuple[FixPlan, str], ...] = ()
    """Plans not applied, with why (display-only, or unsafe without ``unsafe=True``)."""
    written: bool = False
    error: FixError | None = None
    passes: int = 0
    old_data: bytes = b""
    """The bytes fixed (a notebook's: its program), as read or as given."""
    new_data: bytes = b""
    """Those bytes after the fixes, in the file's own encoding."""

    @property
    def changed(self) -> bool:
        return self.new_text != self.old_text

    def raise_for_error(self) -> None:
        if self.error is not None:
            raise self.error


def apply_plans(
    plans: Iterable[FixPlan],
    write: bool,
    *,
    unsafe: bool = False,
    max_passes: int = MAX_PASSES,
    texts: Mapping[str, bytes] | None = None,
    scope: WriteScope | None = None,
) -> list[FileResult]:
    """Apply ``plans`` file by file; write the files only if ``write``, and only where
    ``scope`` lets a fix write (:func:`write_source`).

    Safe plans are applied; unsafe ones only with ``unsafe=True``; display-only ones never.
    ``texts``: a file's bytes as already fixed in memory (a notebook's: its program), fixed
    again instead of what the file holds; with ``texts`` nothing is written.
    """
    by_path: dict[str, list[FixPlan]] = {}
    for plan in plans:
        for part in (plan, *plan.in_other_files()):
            by_path.setdefault(part.path, []).append(part)
    texts = texts or {}
    return [
        _apply_file(path, file_plans, write and path not in texts, unsafe, max_passes, texts.get(path), scope)
        for path, file_plans in by_path.items()
    ]


def write_fixed(path: str, analysed: bytes, fixed: bytes, scope: WriteScope | None = None) -> str:
    """Replace the file whose content (a notebook's: its program) was ``analysed`` with its
    ``fixed`` bytes, once, atomically (:func:`write_source`, judged by ``scope``); the diff
    written. Raises a :class:`FixError`, the file left as it was, where it changed since it
    was analysed or no longer leads where it did."""
    if is_notebook(path):
        edit = edit_notebook(path, analysed, fixed.decode("utf-8"))
        write_source(path, edit.old_bytes, edit.new_bytes, scope=scope)
        return edit.diff
    write_source(path, analysed, fixed, scope=scope)
    old_text, _ = decode_source_with_encoding(path, analysed)
    new_text, _ = decode_source_with_encoding(path, fixed)
    return unified_diff(path, old_text, new_text)


def apply_to_source(path: str, data: bytes, plans: Iterable[FixPlan], *, unsafe: bool = False) -> FileResult:
    """Apply ``plans`` (made against ``data``, the text of ``path``) to ``data`` itself, not to
    the file: source read from stdin. Nothing is written."""
    return _apply_file(path, list(plans), False, unsafe, MAX_PASSES, data)


def choose_plans(plans: Iterable[FixPlan], unsafe: bool) -> tuple[list[FixPlan], list[tuple[FixPlan, str]]]:
    """(the plans to apply, the others with why): safe plans, unsafe ones only with ``unsafe``
    (``--unsafe-fixes``, or a quick fix the user picked), display-only ones never. The label
    decides, the one a finding's ``fix`` line shows."""
    chosen: list[FixPlan] = []
    skipped: list[tuple[FixPlan, str]] = []
    for plan in plans:
        if plan.safety == "display-only":
            skipped.append((plan, "display-only: " + ("; ".join(plan.problems) or "no edit can be made")))
        elif plan.safety == "unsafe" and not unsafe:
            skipped.append((plan, "unsafe: " + ("; ".join(plan.unsafe_reasons) or plan.rationale)))
        else:
            chosen.append(plan)
    return chosen, skipped


def fix_text(
    path: str,
    text: str,
    plans: Sequence[FixPlan],
    *,
    encoding: str = "utf-8",
    original: bytes | None = None,
    max_passes: int = MAX_PASSES,
) -> tuple[str, int]:
    """``text`` (the source of ``path``) with every one of ``plans`` applied, and the passes it
    took: the one way a fix is made, for files and stdin (:func:`apply_plans`), an editor's
    buffer (the language server) and a kernel's cells (``%offload_fix``).

    The codemods run on the statements the plans need until a pass changes nothing; only the
    lines they changed are spliced into ``text``; the changed statements must parse and compile
    (:func:`verify`, in ``encoding``; ``original``, the bytes ``text`` was decoded from, tells a
    fix that breaks the file from a file that was broken). Raises a :class:`FixError`."""
    jobs = tuple(job for plan in plans for job in plan.jobs)
    style = code_style_for(path)
    key = (path, text, jobs, encoding, original, max_passes, style)
    with _recent_fixes_lock:
        found = _recent_fixes.get(key)
        if found is not None:
            _recent_fixes.move_to_end(key)
            return found
    new_text, passes = _fix_text(path, text, jobs, encoding, original, max_passes, style)
    with _recent_fixes_lock:
        _recent_fixes[key] = (new_text, passes)
        while len(_recent_fixes) > 16:
            _recent_fixes.popitem(last=False)
    return new_text, passes


def _fix_text(
    path: str,
    text: str,
    jobs: Sequence[Job],
    encoding: str,
    original: bytes | None,
    max_passes: int,
    style: CodeStyle | None,
) -> tuple[str, int]:
    view = libcst_view(text)  # what libcst prints back as it is (form feeds in indentation cut)
    try:
        new_view, changed, passes = call_allowing_deep_recursion(
            lambda: fix_source_to_fixpoint(FileOutline.of(path, view), jobs, max_passes, style)
        )
    except RecursionError as exc:
        raise _too_deep(path) from exc
    new_text = restore(text, view, new_view)
    if new_text != text and libcst_view(new_text) != new_view:
        raise FixVerificationError(path, "the fix could not be put back around the file's form feeds; left unchanged")
    if new_text != text:
        try:
            new_data = encode(new_text, encoding)
        except UnicodeEncodeError as exc:
            raise FixVerificationError(
                path, f"the fixed text cannot be written in {encoding} ({exc.reason}); left unchanged"
            ) from exc
        verify(path, new_data, changed, original=original if original is not None else encode(text, encoding))
    return new_text, passes


def _apply_file(
    path: str,
    plans: list[FixPlan],
    write: bool,
    unsafe: bool,
    max_passes: int,
    data: bytes | None = None,
    scope: WriteScope | None = None,
) -> FileResult:
    chosen, skipped = choose_plans(plans, unsafe)
    if not path:  # diagnostics that name no file: nothing to read, only reasons to show
        return FileResult(path, "", "", "", skipped=tuple(skipped))
    from_file = data is None
    try:
        if data is None:
            data = read_source(path)
        check_fresh(path, data, (plan.source_sha256 for plan in chosen))
        old_text, encoding = decode_source_with_encoding(path, data)
        if not chosen:
            FileOutline.of(path, old_text)  # a file that is not Python is an error even with nothing to apply
            return FileResult(path, old_text, old_text, "", skipped=tuple(skipped), old_data=data, new_data=data)
        new_text, passes = fix_text(path, old_text, chosen, encoding=encoding, original=data, max_passes=max_passes)
        new_data = encode(new_text, encoding)
        written = False
        diff = ""
        if new_data != data:
            expected, written_data, diff = data, new_data, unified_diff(path, old_text, new_text)
            if is_notebook(path) and from_file:  # the program goes back into the edited cells only
                edit = edit_notebook(path, data, new_text)
                expected, written_data, diff = edit.old_bytes, edit.new_bytes, edit.diff
            if write:
                write_source(path, expected, written_data, scope=scope)
                written = True
        return FileResult(
            path, old_text, new_text, diff, tuple(chosen), tuple(skipped), written, None, passes, data, new_data
        )
    except RecursionError:
        error: FixError = _too_deep(path)
    except FixError as exc:
        error = exc
    return FileResult(path, "", "", "", (), tuple(skipped) + tuple((p, str(error)) for p in chosen), False, error)


def _too_deep(path: str) -> SourceSyntaxError:
    return SourceSyntaxError(
        path, "nested too deeply for the fixer's tree walks (Python's recursion limit); nothing was written", 1, 1
    )


def fix_source_to_fixpoint(
    source: FileOutline, jobs: Sequence[Job], max_passes: int = MAX_PASSES, style: CodeStyle | None = None
) -> tuple[str, list[str], int]:
    """:func:`fix_to_fixpoint` on the statements the jobs need (an excerpt of the file), spliced
    back: (new text, the new text of each changed chunk, passes)."""
    excerpt = source.excerpt_for(target for _, target in jobs)
    local = [(codemod, target.remapped(excerpt.excerpt_line)) for codemod, target in jobs]
    fixed, passes = fix_to_fixpoint(source.path, excerpt.module, local, max_passes, source.reference_count, style)
    if fixed is excerpt.module:
        return source.text, [], passes
    text, changed = excerpt.splice(fixed)
    check_intended(source, excerpt, fixed, text)
    return text, changed, passes


def check_intended(source: FileOutline, excerpt: Excerpt, fixed: cst.Module, text: str) -> None:
    """The spliced ``text`` must hold exactly the file's statements with the excerpt's replaced
    by the fixed ones (compared as ``ast`` trees, top-level statement by statement): a splice
    that duplicates a definition or drops a body compiles, and is refused here, as is one that adds a
    statement doing nothing (:mod:`~offload_fixer.fixes.no_ops`). And every name
    the fix reads must be bound where it reads it when the module runs
    (:func:`~offload_fixer.fixes.introduced_names.unbound_reads`)."""
    path = source.path
    blanked = Counter(ast.dump(method) for method in excerpt.blanked)
    try:
        # The test methods the excerpt blanked are left out on both sides, each exactly once.
        whole, before, after = ast.parse(text), ast.parse(excerpt.module.code).body, ast.parse(fixed.code).body
        found, unmatched = _dumps(whole.body, blanked)
        expected, unexpected = _dumps([statement for group in source.groups for statement in group], blanked)
        expected.subtract(ast.dump(statement) for statement in before)
        expected.update(ast.dump(statement) for statement in after)
        if unmatched != unexpected or (excerpt.blanked and text.count(BLANKED_LINE) != source.text.count(BLANKED_LINE)):
            found["blanked methods not back as they were"] += 1
    except SyntaxError as exc:
        if only_newer_syntax(exc, text):
            return  # a newer Python's syntax, which this interpreter's ast cannot compare: compiled below
        raise FixVerificationError(path, f"the fixed file would not compile ({exc}); left unchanged") from exc
    except ValueError as exc:
        raise FixVerificationError(path, f"the fixed file would not compile ({exc}); left unchanged") from exc
    if +expected != found:
        extra = sum((found - expected).values())
        missing = sum((expected - found).values())
        raise FixVerificationError(
            path,
            f"the fixed text is not the intended edit ({extra} statement(s) more, {missing} fewer than the fix "
            "made); left unchanged",
        )
    added = Counter(no_op_statements(fixed)) - Counter(no_op_statements(excerpt.module))
    if added:
        raise FixVerificationError(
            path, f"the fix would write a statement that does nothing (`{next(iter(added))}`); left unchanged"
        )
    unbound = unbound_reads(whole, before, after, fixed.code)
    if unbound:
        names = ", ".join(f"`{name}`" for name in unbound)
        raise FixVerificationError(
            path, f"the fix reads {names}, which the module does not bind when it runs (a NameError); left unchanged"
        )


def _dumps(statements: Iterable[ast.stmt], blanked: Counter[str]) -> tuple[Counter[str], Counter[str]]:
    """The ``ast.dump`` of each statement, a class's without the methods in ``blanked`` (as
    many of each as it counts); and the blanked methods found nowhere."""
    left = Counter(blanked)
    dumps: Counter[str] = Counter()
    for statement in statements:
        if left and isinstance(statement, ast.ClassDef):
            body = []
            for member in statement.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    dump = ast.dump(member)
                    if left[dump] > 0:
                        left[dump] -= 1
                        continue
                body.append(member)
            statement = copy.copy(statement)
            statement.body = body
        dumps[ast.dump(statement)] += 1
    return dumps, +left


def fix_to_fixpoint(
    path: str,
    module: cst.Module,
    jobs: Sequence[Job],
    max_passes: int = MAX_PASSES,
    reference_count: Callable[[str], int] | None = None,
    style: CodeStyle | None = None,
) -> tuple[cst.Module, int]:
    """Run the (codemod, target) jobs until a whole pass leaves the module unchanged;
    returns the module and the number of passes (2 when the fixes apply and then hold).
    ``style``: the project's (:mod:`offload_fixer.code_style`): the quotes of the strings the
    fixes write, and the line length the lines they made are wrapped to once they hold
    (:mod:`~offload_fixer.fixes.layout`).

    Each pass runs each codemod once over the file with all of its targets. Targets carry
    line numbers of the analysed text; before each run they are moved to where those lines
    are now (an earlier edit may have added lines above them). Two targets that edit one
    node are applied in successive passes.
    """
    batches: dict[type[FixCommand], list[FunctionTarget]] = {}
    for codemod, target in jobs:
        batches.setdefault(codemod, []).append(target)
    original = module.code
    current, code = module, original
    maps: dict[str, LineMap] = {}
    facts: SourceFacts | None = None
    for passes in range(1, max_passes + 1):
        before = code
        for codemod, targets in batches.items():
            if code != original:
                lines = maps.get(code) or maps.setdefault(code, LineMap(split_lines(original), split_lines(code)))
                targets = [t.remapped(lines) for t in targets]
            # the facts of a module the last codemod left unchanged are handed on: collected once per confirming pass
            known = facts if facts is not None and facts.module is current else None
            run = codemod(
                CodemodContext(filename=path),
                targets=targets,
                reference_count=reference_count,
                facts=known,
                style=style,
            )
            fixed = run.transform_module(current)
            facts = getattr(run, "facts", None)
            if fixed is not current:
                current, code = fixed, fixed.code
        if code == before:
            return (wrap_long_lines(original, current, style) if style is not None else current), passes
    raise FixNotConvergedError(path, f"the fixes still changed the file after {max_passes} passes; nothing was written")


# ---------------------------------------------------------------------------------------
# Line numbers across edits
class LineMap:
    """Maps 1-based lines of an old text to the lines they became in a new text."""

    def __init__(self, old: Sequence[str], new: Sequence[str]) -> None:
        self._opcodes = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()

    def __call__(self, line: int | None) -> int | None:
        if line is None:
            return None
        index = line - 1
        for tag, i1, i2, j1, j2 in self._opcodes:
            if i1 <= index < i2:
                if tag == "equal":
                    return j1 + (index - i1) + 1
                return j1 + min(index - i1, max(j2 - j1 - 1, 0)) + 1
        return line


# ---------------------------------------------------------------------------------------
# Checking and writing
def verify(path: str, data: bytes, changed: Sequence[str] | None = None, original: bytes | None = None) -> None:
    """The rewritten bytes must parse again (libcst) and compile (CPython): the whole file, or
    only its ``changed`` top-level statements when every other byte is the original text (a
    chunk of the outline parses alone as it does in the file; a ``__future__`` import, which
    can change the syntax of the rest, makes it the whole file). Where they do not and
    ``original`` does not compile either, the file itself is the problem, not the fix."""
    whole = changed is None or b"__future__" in data
    try:
        if whole:
            cst.parse_module(decode(data)[0])  # decoded as CPython does: libcst misreads CR-only cookies
            compile_any_version(data, path)
        else:
            for code in changed or ():
                cst.parse_module(code)
                compile_any_version(code, path)
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        if original is not None:
            try:
                compile(original, path, "exec", dont_inherit=True)
            except SyntaxError as before:
                raise SourceSyntaxError(
                    path, f"CPython cannot compile it: {before.msg}", before.lineno or 1, before.offset or 1
                ) from exc
            except (ValueError, RecursionError, MemoryError) as before:
                raise SourceSyntaxError(path, f"CPython cannot compile it: {before}", 1, 1) from exc
        raise FixVerificationError(path, f"the fixed file would not compile ({exc}); left unchanged") from exc
