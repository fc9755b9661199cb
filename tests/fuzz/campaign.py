"""The fix fuzz campaign: mutated variants of the examples and fixtures, fixed, and checked.

Every variant is written to a file, checked statically, and every fix (safe and unsafe, so
that each codemod is exercised) is applied and written, as ``check --fix --unsafe-fixes``
does. Properties, on every variant:

* nothing raises (a traceback is a failure, whatever it says);
* the check accepts the file (every variant is valid Python stored in a way CPython reads);
* the fixed file compiles;
* a second fix changes nothing;
* every byte outside the edited statements is the original's: lines whose content is
  unchanged keep their bytes (line end included), and no line outside a statement (blank,
  comment) is deleted or rewritten; a BOM and the coding cookie stay;
* the program still runs (``run_programs``): where the original runs as ``__main__``, the
  fixed one does too.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import textwrap
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from offload_fixer.model import STRATEGIES

from .mutations import Variant, make_variant

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (
    sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.py"))
    + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "codemods" / "fixtures").glob("*.before.py"))
    + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "lsp_fixtures").glob("*.py"))
    + ["tests/runner_programs/transfer_to_host.py", "tests/explain_fixtures/offload_scenarios.py"]
)
JAX_VERSIONS = ("0.4.26", "0.6.2", "0.10.2")
"""One per regime: the spellings and the findings differ, so do the fixes."""
_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@dataclass
class Outcome:
    variant: Variant
    fixes_applied: int = 0
    files_changed: bool = False
    problems: list[str] = field(default_factory=list)
    """Property failures, each naming its kind first (``traceback:``, ``outside-edit:`` ...)."""
    fixed: bytes = b""


def variants(count: int, seed: int) -> list[Variant]:
    """``count`` variants, the same for the same seed."""
    rng = random.Random(seed)
    texts = {source: (ROOT / source).read_text(encoding="utf-8") for source in SOURCES}
    return [
        make_variant(source, texts[source], rng, rng.choice(JAX_VERSIONS), rng.choice(STRATEGIES))
        for source in (rng.choice(SOURCES) for _ in range(count))
    ]


def fix_variant(variant: Variant, directory: Path, index: int = 0) -> Outcome:
    outcome = Outcome(variant)
    path = directory / f"v{index:04d}_{Path(variant.source).name.replace('.before', '')}"
    path.write_bytes(variant.data)
    try:
        outcome.fixes_applied, errors = _fix_once(path, variant)
        outcome.problems += errors
        outcome.fixed = path.read_bytes()
        outcome.files_changed = outcome.fixed != variant.data
        if outcome.files_changed:
            outcome.problems += [f"not-compiling: {e}" for e in _compile_errors(outcome.fixed, path)]
            outcome.problems += [f"outside-edit: {p}" for p in changed_outside_statements(variant.data, outcome.fixed)]
        _, again = _fix_once(path, variant)
        outcome.problems += again
        if path.read_bytes() != outcome.fixed:
            outcome.problems.append("not-idempotent: a second fix changed the file again")
    except Exception:  # noqa: BLE001 - the property: nothing raises
        outcome.problems.append("traceback: " + traceback.format_exc())
    return outcome


def _fix_once(path: Path, variant: Variant) -> tuple[int, list[str]]:
    """One ``offload-fixer check --fix --unsafe-fixes`` of the file, in this process, as the
    command does it (fix again in memory while a fix changes the file): the fixes it made, and
    what is wrong (a traceback, an exit status it may not give, a file written other than
    the one named, or a file replaced more than once)."""
    from click.testing import CliRunner

    from offload_fixer.cli import main
    from offload_fixer.exit_codes import ExitCode
    from offload_fixer.fixes import apply as fix_apply

    written: list[str] = []
    write_source = fix_apply.write_source

    def counted(target: str, expected: bytes, data: bytes, **options) -> None:
        written.append(os.path.realpath(target))
        write_source(target, expected, data, **options)

    fix_apply.write_source = counted
    try:
        arguments = ["check", "--fix", "--unsafe-fixes", "--jax-version", variant.jax_version]
        result = CliRunner().invoke(main, [*arguments, "--strategy", variant.strategy, "-j", "1", str(path)])
    finally:
        fix_apply.write_source = write_source
    problems = []
    output = result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        problems.append(
            "traceback: " + "".join(traceback.format_exception(result.exception))[-3000:]  # type: ignore[arg-type]
        )
    elif result.exit_code == ExitCode.INPUT_ERROR:
        problems.append(f"refused: a valid program was refused: {output[-2000:]}")
    elif result.exit_code == ExitCode.FIX_REFUSED:
        problems += [f"fix-refused: {line}" for line in output.splitlines() if "fix refused" in line] or [
            f"fix-refused: {output[-2000:]}"
        ]
    elif result.exit_code not in (ExitCode.CLEAN, ExitCode.FINDINGS):
        problems.append(f"wrong-exit-code: {result.exit_code}\n{output[-2000:]}")
    named = os.path.realpath(path)
    problems += [f"write-outside: {target} (only {named} was named)" for target in written if target != named]
    if written.count(named) > 1:
        problems.append(f"replaced-twice: one check --fix replaced the file {written.count(named)} times")
    fixed = re.search(r"\((\d+) fixed", output)
    return (int(fixed.group(1)) if fixed and written else 0), problems


def _compile_errors(data: bytes, path: Path) -> list[str]:
    try:
        compile(data, str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return [str(exc)]
    return []


# ---------------------------------------------------------------------------------------
# Bytes outside the edited statements
def changed_outside_statements(original: bytes, fixed: bytes) -> list[str]:
    """What changed that no edit may change, comparing the stored bytes (not a re-print).

    Lines are aligned on their content (without their ends). A line whose content is
    unchanged must keep its exact bytes; a line deleted or rewritten must lie inside a
    statement of the original (a blank or comment line between statements never may)."""
    problems = []
    if original.startswith(b"\xef\xbb\xbf") != fixed.startswith(b"\xef\xbb\xbf"):
        problems.append("the byte-order mark was added or dropped")
    old, new = _LINE.findall(original), _LINE.findall(fixed)
    inside = statement_lines(original)
    matcher = difflib.SequenceMatcher(None, [_body(x) for x in old], [_body(x) for x in new], autojunk=False)
    for tag, i1, i2, j1, _j2 in matcher.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                if old[i1 + k] != new[j1 + k]:
                    problems.append(f"line {i1 + k + 1}: {old[i1 + k]!r} became {new[j1 + k]!r}")
        elif tag in ("replace", "delete"):
            for i in range(i1, i2):
                if i + 1 not in inside:
                    problems.append(f"line {i + 1} {old[i]!r}, outside every statement, was {tag}d")
    return problems


def statement_lines(data: bytes) -> set[int]:
    """Lines of the original that hold a statement: a simple statement's lines, a compound
    statement's decorators and header (up to its body)."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(data)):
        if not isinstance(node, ast.stmt):
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt) and body[0].lineno > node.lineno:
            last = body[0].lineno - 1
        elif isinstance(body, list) and body:
            last = node.lineno  # ``def f(): return x`` on one line
        else:
            last = node.end_lineno or node.lineno
        lines.update(range(first, last + 1))
    return lines


def _body(line: bytes) -> bytes:
    return line.rstrip(b"\r\n") if line.endswith((b"\n", b"\r")) else line


# ---------------------------------------------------------------------------------------
# The programs still run
RUNNER = textwrap.dedent(
    """
    import contextlib, io, json, os, runpy, signal, sys
    results = {}
    def alarm(*_):
        raise TimeoutError("ran over %s s")
    signal.signal(signal.SIGALRM, alarm)
    for path in json.loads(sys.stdin.read()):
        sys.argv = [path]
        out = io.StringIO()
        try:
            signal.alarm(%s)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                runpy.run_path(path, run_name="__main__")
            results[path] = None
        except SystemExit as exc:
            results[path] = None if exc.code in (0, None) else f"exit {exc.code}"
        except BaseException as exc:
            results[path] = f"{type(exc).__name__}: {str(exc)[:300]}"
        finally:
            signal.alarm(0)
    print(json.dumps(results))
    """
)


def run_programs(paths: list[Path], timeout_s: int = 120) -> dict[str, str | None]:
    """Run each file as ``__main__`` in one fresh process (JAX on the CPU); ``None`` where it
    ran to the end, else why not."""
    if not paths:
        return {}
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1"}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER % (timeout_s, timeout_s)],
        input=json.dumps([str(p) for p in paths]),
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=timeout_s * len(paths) + 120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the program runner failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_programs_run(outcomes: list[Outcome], directory: Path) -> int:
    """The property: a fixed program runs wherever its unfixed original runs. Only fixes
    made for the installed JAX's regime can be run here (a fix spelled for 0.4.26 is not
    meant for 0.10.2's typed memory spaces), and a fix that declares an output host memory only
    where this CPU backend has host memory; returns how many programs were run."""
    from offload_fixer import jax_compat

    installed = jax_compat.regime()
    host_outputs_run_here = jax_compat.host_memory_on_this_backend()
    changed = [
        (i, o)
        for i, o in enumerate(outcomes)
        if o.files_changed
        and not o.problems
        and jax_compat.spelling(o.variant.jax_version).regime is installed
        and (host_outputs_run_here or o.variant.strategy != "host")
    ]
    pairs = []
    for i, outcome in changed:
        before = directory / f"run{i:04d}_before.py"
        after = directory / f"run{i:04d}_after.py"
        before.write_bytes(outcome.variant.data)
        after.write_bytes(outcome.fixed)
        pairs.append((outcome, before, after))
    ran = run_programs([p for _, before, after in pairs for p in (before, after)])
    for outcome, before, after in pairs:
        if ran.get(str(before)) is None and ran.get(str(after)) is not None:
            outcome.problems.append(f"program-fails: the fixed program no longer runs: {ran[str(after)]}")
    return len(pairs)


# ---------------------------------------------------------------------------------------
def run_campaign(count: int, seed: int, run: bool = True) -> tuple[list[Outcome], Counter]:
    with tempfile.TemporaryDirectory(prefix="offload-fixer-fuzz-") as tmp:
        directory = Path(tmp)
        outcomes = [fix_variant(v, directory, i) for i, v in enumerate(variants(count, seed))]
        programs_run = check_programs_run(outcomes, directory) if run else 0
    counts: Counter = Counter()
    counts["variants tried"] = len(outcomes)
    counts["files fixed"] = sum(o.files_changed for o in outcomes)
    counts["fixes applied"] = sum(o.fixes_applied for o in outcomes)
    counts["fixed programs run"] = programs_run
    for o in outcomes:
        for problem in o.problems:
            counts[problem.split(":", 1)[0]] += 1
    return outcomes, counts
