"""Seeded path and hostile-file cases: where a fix may write, and what no input may cost.

Each case builds a project (``proj/``, with a ``pyproject.toml``) beside a directory outside
it, runs one command in this process, from the project, and checks:

* nothing outside the project changed, byte for byte, unless it was named on the command line;
* no file was replaced more than once by the command;
* the exit status is the one the case calls for, and nothing raised;
* the findings of the other files were still reported (a hostile notebook costs nothing else).

Kinds: ``fix REPORT`` with the finding's path spelled every way a shared report can spell it
(inside, ``..``, absolute, through a symlink, not Python, missing) and its hash right, stale,
absent or the report without any; ``check --fix`` of a tree with file and directory symlinks
(inside and out), hard links, two-round fixes and read-only files; notebooks whose cells end
lines in ``\\r``, ``\\r\\n`` or ``\\n``, or each line its own way; JSON and TOML nested
thousands deep.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from offload_fixer.exit_codes import ExitCode

from .bad_input import FIXABLE, NOTEBOOK_CELLS, OLD, _notebook, _report_record
from .interrupts import MULTI_PASS

SPELLINGS = ("inside", "dot-slash", "through-a-subdirectory", "dotdot", "absolute-outside", "absolute-inside")
SPELLINGS += ("symlink-out", "symlink-in", "not-python", "missing")
HASHES = ("right", "right", "stale", "absent", "no-sources")


@dataclass
class PathCase:
    kind: str
    label: str
    command: list[str]
    expected: int
    must_change: tuple[str, ...] = ()
    """Files (relative to the case's directory) the command must fix."""
    must_say: tuple[str, ...] = ()
    check: Callable[[Path], str | None] | None = None


@dataclass
class PathOutcome:
    case: PathCase
    problems: list[str] = field(default_factory=list)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _base(directory: Path) -> Path:
    project = directory / "proj"
    _write(project / "pyproject.toml", "[project]\nname = 'p'\n")
    _write(directory / "outside" / "prog.py", FIXABLE)
    _write(directory / "outside" / "pkg" / "mod.py", FIXABLE)
    return project


# ---------------------------------------------------------------------------------------
def report_case(directory: Path, rng: random.Random) -> PathCase:
    project = _base(directory)
    spelling, hashing = rng.choice(SPELLINGS), rng.choice(HASHES)
    inside = _write(project / "src" / "train.py", FIXABLE)
    name, target = {
        "inside": ("src/train.py", inside),
        "dot-slash": ("./src/train.py", inside),
        "through-a-subdirectory": ("src/../src/train.py", inside),
        "dotdot": ("../outside/prog.py", directory / "outside" / "prog.py"),
        "absolute-outside": (str(directory / "outside" / "prog.py"), directory / "outside" / "prog.py"),
        "absolute-inside": (str(inside), inside),
        "symlink-out": ("src/linked.py", directory / "outside" / "prog.py"),
        "symlink-in": ("src/alias.py", inside),
        "not-python": ("src/notes.txt", _write(project / "src" / "notes.txt", FIXABLE)),
        "missing": ("src/gone.py", project / "src" / "gone.py"),
    }[spelling]
    if spelling == "symlink-out":
        os.symlink(target, project / name)
    elif spelling == "symlink-in":
        os.symlink("train.py", project / name)
    digest = hashlib.sha256(target.read_bytes()).hexdigest() if target.exists() else "0" * 64
    sources = {"no-sources": {}, "absent": {"src/other.py": "0" * 64}}.get(hashing, {name: digest})
    _write(project / "report.json", json.dumps(_report_record(name, sources)))
    if hashing == "stale" and target.exists() and spelling not in ("dotdot", "absolute-outside", "symlink-out"):
        target.write_text(FIXABLE + "# edited since the run\n")
    allowed = spelling in ("inside", "dot-slash", "through-a-subdirectory", "absolute-inside", "symlink-in")
    if hashing == "no-sources" or (spelling == "missing" and hashing != "absent"):
        expected = ExitCode.INPUT_ERROR
    elif allowed and hashing == "right":
        expected = ExitCode.CLEAN
    else:
        expected = ExitCode.FIX_REFUSED
    return PathCase(
        "fix REPORT",
        f"report: {spelling}, hash {hashing}",
        ["fix", "--unsafe-fixes", "report.json"],
        expected,
        must_change=("proj/src/train.py",) if expected == ExitCode.CLEAN else (),
    )


def tree_case(directory: Path, rng: random.Random) -> PathCase:
    project = _base(directory)
    real = []
    problems = []  # each file's findings: MULTI_PASS holds an error 1200 and host compute (OFL1201)
    for i in range(rng.randint(1, 4)):
        multi_pass = rng.random() < 0.4
        text = MULTI_PASS.replace("train_step", f"train_step_{i}") if multi_pass else FIXABLE
        real.append(_write(project / "src" / f"pkg{i % 2}" / f"m{i}.py", text))
        problems.append(2 if multi_pass else 1)
    links = []
    if rng.random() < 0.7:
        os.symlink(directory / "outside" / "prog.py", project / "src" / "out_file.py")
        links.append("file out")
    if rng.random() < 0.5:
        os.symlink(directory / "outside" / "pkg", project / "src" / "out_dir")
        links.append("directory out")
    if rng.random() < 0.5:
        os.symlink(real[0], project / "src" / "alias.py")
        links.append("file in")
    if rng.random() < 0.3:
        os.symlink(project / "src" / "pkg0", project / "src" / "pkg0_again")
        links.append("directory in")
    if rng.random() < 0.3:
        os.link(real[-1], directory / "outside" / "hard.py")
        links.append("hard link out")
    read_only = len(real) > 1 and rng.random() < 0.3
    if read_only:
        real[-1].chmod(0o444)
    total = sum(problems)
    fixed = total - (problems[-1] if read_only else 0)
    summary = f"Found {total} problem{'s' if total != 1 else ''} ({fixed} fixed, {total - fixed} remaining"
    return PathCase(
        "check --fix tree",
        f"tree: {len(real)} files, links {links or 'none'}{', one read-only' if read_only else ''}",
        ["check", "--fix", "--unsafe-fixes", "--jax-version", OLD, "src"],
        ExitCode.FIX_REFUSED if read_only else ExitCode.CLEAN,
        must_change=tuple(str(p.relative_to(directory)) for p in real[: len(real) - read_only]),
        must_say=(summary,),
    )


def notebook_case(directory: Path, rng: random.Random) -> PathCase:
    project = _base(directory)
    newlines = [rng.choice(["\n", "\r", "\r\n", "mixed"]) for _ in NOTEBOOK_CELLS]
    cells = [
        "".join(
            line + (rng.choice(["\n", "\r", "\r\n"]) if newline == "mixed" else newline)
            for line in cell.split("\n")[:-1]
        )
        for cell, newline in zip(NOTEBOOK_CELLS, newlines)
    ]
    path = _write(project / "nb.ipynb", _notebook(tuple(cells)))
    before = [cell["source"] for cell in json.loads(path.read_text())["cells"]]

    def line_ends_kept(_directory: Path) -> str | None:
        after = [cell["source"] for cell in json.loads(path.read_text())["cells"]]
        if "out_shardings" not in after[1]:
            return f"the fix is not in the jitted function's cell: {after!r}"
        for old, new in zip(before, after):
            if not set(re.findall(r"\r\n|\r|\n", new)) <= set(re.findall(r"\r\n|\r|\n", old)):
                return f"a cell's line ends changed: {old!r} -> {new!r}"
        return None

    return PathCase(
        "notebook line ends",
        f"notebook: cells ending lines in {[n if n == 'mixed' else repr(n) for n in newlines]}",
        ["check", "--fix", "--unsafe-fixes", "--jax-version", OLD, "nb.ipynb"],
        ExitCode.CLEAN,
        must_change=("proj/nb.ipynb",),
        check=line_ends_kept,
    )


def deep_case(directory: Path, rng: random.Random) -> PathCase:
    project = _base(directory)
    _write(project / "src" / "train.py", FIXABLE)
    if rng.random() < 0.5:
        depth = rng.randint(2_000, 50_000)
        text = rng.choice(["[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth])
        _write(project / "src" / "deep.ipynb", text)
        return PathCase(
            "deep JSON",
            f"notebook JSON {depth} deep beside a Python file",
            ["check", "--jax-version", OLD, "src"],
            ExitCode.INPUT_ERROR,
            must_say=("deep.ipynb", "src/train.py:10:9"),
        )
    depth = rng.randint(2_000, 6_000)
    value = rng.choice(["[" * depth + "]" * depth, "{a=" * depth + "1" + "}" * depth])
    _write(project / "src" / "pyproject.toml", f"[tool.offload-fixer]\nx = {value}\n")
    return PathCase(
        "deep TOML",
        f"pyproject.toml {depth} deep",
        ["check", "--jax-version", OLD, "src"],
        ExitCode.USAGE,
        must_say=("pyproject.toml", "nested too deeply"),
    )


MAKERS = (report_case, tree_case, notebook_case, deep_case)


# ---------------------------------------------------------------------------------------
def _snapshot(root: Path, hard_links: bool = True) -> dict[str, bytes]:
    """Every regular file's bytes (without ``hard_links``, not those with a second link: a hard
    link to a project file is that file, not another)."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink() and (hard_links or path.stat().st_nlink == 1):
            found[str(path.relative_to(root))] = path.read_bytes()
    return found


@contextmanager
def _counting_writes() -> Iterator[list[str]]:
    from offload_fixer.fixes import apply as fix_apply

    written: list[str] = []
    write_source = fix_apply.write_source

    def counted(target: str, expected: bytes, data: bytes, **options) -> None:
        written.append(os.path.realpath(target))
        write_source(target, expected, data, **options)

    fix_apply.write_source = counted
    try:
        yield written
    finally:
        fix_apply.write_source = write_source


def run_path_case(case: PathCase, directory: Path) -> list[str]:
    """What is wrong with the case's command (nothing: ``[]``)."""
    from click.testing import CliRunner

    from offload_fixer.cli import main

    outside_before = _snapshot(directory / "outside", hard_links=False)
    project_before = _snapshot(directory / "proj")
    problems = []
    cwd = os.getcwd()
    os.chdir(directory / "proj")
    try:
        with _counting_writes() as written:
            result = CliRunner().invoke(main, case.command)
    finally:
        os.chdir(cwd)
    output = result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        problems.append("traceback: " + "".join(traceback.format_exception(result.exception))[-2000:])
    elif result.exit_code != case.expected:
        problems.append(f"wrong exit code: {result.exit_code}, expected {int(case.expected)}\n{output[-1500:]}")
    if _snapshot(directory / "outside", hard_links=False) != outside_before:
        problems.append(f"write outside: a file outside the project changed\n{output[-1500:]}")
    for target, count in Counter(written).items():
        if count > 1:
            problems.append(f"replaced more than once: {target} ({count} times)")
    project_after = _snapshot(directory / "proj")
    for name in case.must_change:
        relative = name.removeprefix("proj/")
        if project_after.get(relative) == project_before.get(relative):
            problems.append(f"lost fix: {name} was not fixed\n{output[-1500:]}")
    missing = [words for words in case.must_say if words not in output]
    if missing:
        problems.append(f"lost report: the output does not say {missing}\n{output[-1500:]}")
    if case.check is not None and not problems and (problem := case.check(directory)):
        problems.append(f"wrong outcome: {problem}")
    return problems


def run_path_cases(count: int, seed: int, directory: Path) -> tuple[Counter, list[str]]:
    rng = random.Random(seed)
    counts: Counter = Counter()
    details = []
    for index in range(count):
        case_directory = directory / f"case{index:04d}"
        case_directory.mkdir()
        case = rng.choice(MAKERS)(case_directory, rng)
        counts[f"{case.kind} cases"] += 1
        for problem in run_path_case(case, case_directory):
            counts[problem.split(":", 1)[0]] += 1
            details.append(f"{case.label}: {problem}")
        for path in case_directory.rglob("*"):
            if path.is_file() and not path.is_symlink():
                path.chmod(0o644)
    return counts, details


PATH_FAILURES = (
    "traceback",
    "wrong exit code",
    "write outside",
    "replaced more than once",
    "lost fix",
    "lost report",
    "wrong outcome",
)
