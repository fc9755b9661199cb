"""The CLI bad-input table: each odd input a user can give, the exit code it must give, no
traceback and no hang. Shared by ``tests/fuzz/test_bad_input.py`` (every row, in CI) and
``scripts/fuzz.py`` (the campaign's counts).

Unreadable files and directories are made with mode 000; as root, the command then runs
without the capabilities that let root read anything (``setpriv``), as a user would.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from offload_fixer.exit_codes import ExitCode

ENTRY = shutil.which("offload-fixer", path=os.path.dirname(sys.executable))
TIMEOUT_S = 90
"""A command still running after this long has hung (each takes a few seconds)."""
OLD = "0.4.26"
"""A JAX whose rules find the move to host below (the check never imports JAX's code)."""

FIXABLE = textwrap.dedent(
    """\
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = jax.make_mesh((1,), ("x",))
    host = NamedSharding(mesh, P(), memory_kind="pinned_host")


    @jax.jit
    def step(x):
        h = jax.device_put(x, host)
        return x, h
    """
)
UNSAFE_FIXABLE = (
    "import jax\n\n\n@jax.jit\ndef step(x):\n    h = jax.device_put(x, jax.memory.Space.Host)\n    return x, h\n"
)
"""Its host-output fix builds a sharding the source does not show: labelled unsafe."""
RUNNABLE = textwrap.dedent(
    """\
    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


    @jax.jit
    def scaled(x):
        return jax.device_put(x, HOST) * 2
    """
)
ERROR_LOG = (
    "INVALID_ARGUMENT: Tensor which is moved to host (starting from tuple.64) is returned from the entry "
    "computation but the layout for this output is not set to host memory.\n"
)


@dataclass(frozen=True)
class Case:
    name: str
    setup: Callable[[Path], list[str]]
    """Makes the inputs in a directory; returns the command's arguments."""
    expected: int
    check: Callable[[Path, subprocess.CompletedProcess], str | None] | None = None
    """Anything else that must hold; returns what is wrong."""
    needs_unreadable: bool = False
    needs_pinned_host: bool = False
    """The program runs a jit with a pinned_host sharding: this JAX's CPU build must have one."""
    cwd: str = ""
    """Where the command runs, below the case's directory (a project inside it)."""


def has_pinned_host() -> bool:
    """Whether JAX's CPU backend here has pinned_host memory (from JAX 0.5) for programs to run with."""
    import jax

    return "pinned_host" in {m.kind for m in jax.devices()[0].addressable_memories()}


def run_case(case: Case, directory: Path) -> tuple[str | None, subprocess.CompletedProcess | None]:
    """(what is wrong, the process); ``None`` when the row holds."""
    args = case.setup(directory)
    command = [ENTRY, *args]
    if case.needs_unreadable and os.geteuid() == 0:
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *command]
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1", "NO_COLOR": "1"}
    try:
        done = subprocess.run(
            command,
            cwd=directory / case.cwd,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"hang: still running after {TIMEOUT_S} s", None
    finally:
        _restore_permissions(directory)
    output = done.stdout + done.stderr
    if "Traceback (most recent call last)" in output:
        return f"traceback:\n{output[-3000:]}", done
    if done.returncode != case.expected:
        return f"wrong exit code: {done.returncode}, expected {case.expected}\n{output[-2000:]}", done
    if case.check is not None:
        problem = case.check(directory, done)
        if problem:
            return f"wrong outcome: {problem}\n{output[-2000:]}", done
    return None, done


def can_make_unreadable() -> bool:
    return os.geteuid() != 0 or shutil.which("setpriv") is not None


def can_make_append_only(directory: Path) -> bool:
    probe = directory / ".append-only-probe"
    probe.write_text("x")
    try:
        made = subprocess.run(["chattr", "+a", str(probe)], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False
    if made:
        subprocess.run(["chattr", "-a", str(probe)], capture_output=True)
    probe.unlink()
    return made


# ---------------------------------------------------------------------------------------
# Inputs
def _write(directory: Path, name: str, text: str | bytes) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _unreadable(path: Path) -> None:
    path.chmod(0)


def _restore_permissions(directory: Path) -> None:
    """Everything readable and removable again (pytest deletes the directory)."""
    for path in [directory, *directory.rglob("*")] if os.access(directory, os.R_OK) else [directory]:
        if path.is_symlink() or not (path.is_dir() or path.is_file()):
            continue
        if path.is_file() and shutil.which("chattr"):
            subprocess.run(["chattr", "-a", str(path)], capture_output=True)
        path.chmod(0o755 if path.is_dir() else 0o644)
        if path.is_dir():
            _restore_permissions_below(path)


def _restore_permissions_below(directory: Path) -> None:
    for entry in os.scandir(directory):
        path = Path(entry.path)
        if not path.is_symlink() and path.is_dir() and not os.access(path, os.R_OK | os.X_OK):
            path.chmod(0o755)
            _restore_permissions_below(path)


def _fifo(directory: Path, name: str) -> Path:
    path = directory / name
    os.mkfifo(path)
    return path


def _tree_with(directory: Path, make: Callable[[Path], object]) -> list[str]:
    tree = directory / "tree"
    _write(tree, "good.py", "x = 1\n")
    make(tree)
    return ["check", "tree"]


def _report_record(program: str, sources: dict[str, str]) -> dict:
    """What ``run --report`` writes for ``FIXABLE`` at ``program`` (as the report spells it)."""
    return {
        "version": 1,
        "target": "tpu",
        "jax_version": OLD,
        "reports": [
            {
                "target": "tpu",
                "jax_version": OLD,
                "diagnostics": [
                    {
                        "code": "OFL1200",
                        "severity": "error",
                        "target": "tpu",
                        "message": "m",
                        "explanation": "e",
                        "output_path": "[1]",
                        "origin": {
                            "kind": "move_to_host",
                            "memory_kind": "pinned_host",
                            "span": {"path": program, "line": 10, "col": 9},
                        },
                        "function": {"name": "step", "path": program, "line": 8},
                    }
                ],
            }
        ],
        "sources": sources,
    }


def _report(directory: Path, mutate: Callable[[dict], object], program_text: str = FIXABLE) -> Path:
    """A report of ``run`` on ``prog.py`` (holding ``program_text``, hashed as analysed), as
    ``mutate`` leaves it."""
    program = _write(directory, "prog.py", program_text)
    report = _report_record(str(program), {str(program): hashlib.sha256(program.read_bytes()).hexdigest()})
    mutate(report)
    return _write(directory, "report.json", json.dumps(report))


def _dump(directory: Path, files: dict[str, bytes]) -> list[str]:
    _write(directory, "err.log", ERROR_LOG)
    (directory / "dump").mkdir(exist_ok=True)
    for name, data in files.items():
        _write(directory / "dump", name, data)
    return ["explain", "err.log", "--dump", "dump"]


def _untouched(name: str, original: str = FIXABLE) -> Callable[[Path, subprocess.CompletedProcess], str | None]:
    def check(directory: Path, _done: subprocess.CompletedProcess) -> str | None:
        return None if (directory / name).read_text() == original else f"{name} was changed"

    return check


def _says(*words: str) -> Callable[[Path, subprocess.CompletedProcess], str | None]:
    def check(_directory: Path, done: subprocess.CompletedProcess) -> str | None:
        missing = [w for w in words if w not in done.stdout + done.stderr]
        return f"the output does not say {missing}" if missing else None

    return check


def _deep(kind: str) -> str:
    expression = {
        "sum": " + ".join(["x"] * 350),
        "calls": "f(" * 150 + "x" + ")" * 150,
        "attributes": "x" + ".real" * 400,
    }[kind]
    return (
        FIXABLE
        + f"\n\ndef f(v):\n    return v\n\n\n@jax.jit\ndef deep(x):\n    y = {expression}\n    return y, jax.device_put(x, host)\n"
    )


def _per_package(directory: Path) -> list[str]:
    for package, version in (("pkg_a", OLD), ("pkg_b", "0.10.2")):
        _write(directory / package, "pyproject.toml", f'[tool.offload-fixer]\njax-version = "{version}"\n')
        _write(directory / package, "train.py", FIXABLE)
    return ["check", "pkg_b", "pkg_a"]


def _only_pkg_a(_directory: Path, done: subprocess.CompletedProcess) -> str | None:
    # JAX 0.10.2 types the moved value host memory, and the output follows it: no finding
    if "pkg_a/train.py:10" not in done.stdout or "pkg_b/train.py" in done.stdout:
        return "each package's own table did not apply to its own files"
    return None


def _append_only(directory: Path) -> list[str]:
    path = _write(directory, "locked.py", FIXABLE)
    subprocess.run(["chattr", "+a", str(path)], check=True, capture_output=True)
    return ["check", "--fix", "--unsafe-fixes", "--jax-version", OLD, "locked.py"]


def _read_only(directory: Path) -> list[str]:
    _write(directory, "ro.py", FIXABLE).chmod(0o444)
    return ["check", "--fix", "--unsafe-fixes", "--jax-version", OLD, "ro.py"]


def _report_marker_absent(directory: Path, _done: subprocess.CompletedProcess) -> str | None:
    return "the program ran before the report path was refused" if (directory / "ran").exists() else None


def _report_written(directory: Path, done: subprocess.CompletedProcess) -> str | None:
    if not (directory / "report.json").exists():
        return "no report was written"
    if "OFL120" not in done.stdout:
        return "the findings were not printed"
    return None


# ---------------------------------------------------------------------------------------
# Writes confined to the project: a report names paths, a tree holds links
def _project(directory: Path) -> Path:
    """``proj/`` (a project: it has a ``pyproject.toml``) and ``outside/prog.py`` beside it."""
    _write(directory / "proj", "pyproject.toml", "[project]\nname = 'p'\n")
    _write(directory / "outside", "prog.py", FIXABLE)
    return directory / "proj"


def _report_naming(directory: Path, name: str, hashed: bool = True) -> list[str]:
    """A report in ``proj/`` whose finding is in ``name`` (as the report spells it)."""
    project = _project(directory)
    target = Path(name) if os.path.isabs(name) else project / name
    if not os.path.lexists(target):
        _write(target.parent, target.name, FIXABLE)
    sources = {name: hashlib.sha256(target.read_bytes()).hexdigest()} if hashed else {}
    _write(project, "report.json", json.dumps(_report_record(name, sources)))
    return ["fix", "--unsafe-fixes", "report.json"]


def _link_out(directory: Path) -> list[str]:
    project = _project(directory)
    os.symlink(directory / "outside" / "prog.py", project / "linked.py")
    return _report_naming(directory, "linked.py")


def _unchanged(*names: str) -> Callable[[Path, subprocess.CompletedProcess], str | None]:
    def check(directory: Path, _done: subprocess.CompletedProcess) -> str | None:
        changed = [n for n in names if (directory / n).read_text() != FIXABLE]
        return f"written: {changed}" if changed else None

    return check


def _tree_linking_out(directory: Path) -> list[str]:
    project = _project(directory)
    _write(project / "src", "train.py", FIXABLE)
    os.symlink(directory / "outside" / "prog.py", project / "src" / "linked.py")
    os.symlink(project / "src" / "train.py", project / "src" / "again.py")
    return ["check", "--fix", "--unsafe-fixes", "--jax-version", OLD, "src"]


def _tree_with_read_only(directory: Path) -> list[str]:
    _write(directory / "src", "a.py", FIXABLE)
    _write(directory / "src", "b.py", FIXABLE).chmod(0o444)
    return ["check", "--fix", "--unsafe-fixes", "--jax-version", OLD, "src"]


# ---------------------------------------------------------------------------------------
# Notebooks as Jupyter writes (and mangles) them
NOTEBOOK_CELLS = (FIXABLE[: FIXABLE.index("@jax.jit")], FIXABLE[FIXABLE.index("@jax.jit") :])


def _notebook(
    cells: tuple[str, ...] = NOTEBOOK_CELLS,
    language: str = "python",
    minor: int = 5,
    newline: str = "\n",
) -> str:
    return json.dumps(
        {
            "nbformat": 4,
            "nbformat_minor": minor,
            "metadata": {"kernelspec": {"name": language, "display_name": language, "language": language}},
            "cells": [
                {
                    "cell_type": "code",
                    "id": f"c{number}",
                    "metadata": {},
                    "execution_count": None,
                    "outputs": [],
                    "source": source.replace("\n", newline),
                }
                for number, source in enumerate(cells, 1)
            ],
        },
        indent=1,
    )


def _notebook_beside_python(directory: Path, text: str) -> list[str]:
    _write(directory / "tree", "nb.ipynb", text)
    _write(directory / "tree", "train.py", FIXABLE)
    return ["check", "--jax-version", OLD, "tree"]


def _lone_cr_fixed(directory: Path, done: subprocess.CompletedProcess) -> str | None:
    cells = [cell["source"] for cell in json.loads((directory / "nb.ipynb").read_text())["cells"]]
    if "out_shardings" not in cells[1] or any("\n" in cell for cell in cells):
        return f"the fix is not in cell 2, or the cells' lone CRs were not kept: {cells!r}"
    return None


CASES: tuple[Case, ...] = (
    # check: what cannot be read (not a regular file: refused by its type, never read) is an OFL0902
    # finding among the others, exit 1, as ruff's E902
    Case("check-fifo", lambda d: ["check", str(_fifo(d, "pipe.py"))], ExitCode.FINDINGS, _says("OFL0902", "FIFO")),
    Case(
        "check-symlink-to-dev-zero",
        lambda d: (os.symlink("/dev/zero", d / "zero.py"), ["check", "zero.py"])[1],
        ExitCode.FINDINGS,
        _says("OFL0902", "character device"),
    ),
    Case("check-dev-null", lambda d: ["check", "/dev/null"], ExitCode.FINDINGS, _says("OFL0902")),
    Case(
        "check-directory-with-fifo",
        lambda d: _tree_with(d, lambda t: _fifo(t, "pipe.py")),
        ExitCode.FINDINGS,
        _says("OFL0902", "pipe.py", "FIFO"),
    ),
    Case(
        "check-symlink-loop-in-tree",
        lambda d: _tree_with(d, lambda t: (os.symlink("b.py", t / "a.py"), os.symlink("a.py", t / "b.py"))),
        ExitCode.FINDINGS,
        _says("OFL0902", "symlink loop"),
    ),
    Case(
        "check-dangling-symlink-in-tree",
        lambda d: _tree_with(d, lambda t: os.symlink("gone.py", t / "link.py")),
        ExitCode.FINDINGS,
        _says("OFL0902", "link.py"),
    ),
    Case(
        "check-unreadable-directory-in-tree",
        lambda d: _tree_with(d, lambda t: (_write(t / "secret", "x.py", FIXABLE), _unreadable(t / "secret"))),
        ExitCode.FINDINGS,
        _says("OFL0902", "secret", "cannot list"),
        needs_unreadable=True,
    ),
    Case(
        "check-unreadable-file-named",
        lambda d: (_unreadable(_write(d, "x.py", FIXABLE)), ["check", "x.py"])[1],
        ExitCode.FINDINGS,
        _says("OFL0902", "x.py"),
        needs_unreadable=True,
    ),
    Case(
        "check-unreadable-file-in-tree",
        lambda d: _tree_with(d, lambda t: _unreadable(_write(t, "x.py", FIXABLE))),
        ExitCode.FINDINGS,
        _says("OFL0902", "x.py"),
        needs_unreadable=True,
    ),
    # check: what is not Python text is reported, also where the prefilter would drop it
    Case(
        "check-binary-named",
        lambda d: (_write(d, "blob.py", bytes(range(256))), ["check", "blob.py"])[1],
        ExitCode.INPUT_ERROR,
    ),
    Case(
        "check-binary-in-tree",
        lambda d: _tree_with(d, lambda t: _write(t, "blob.py", b"\x00\x01\x02\xff" * 64)),
        ExitCode.INPUT_ERROR,
        _says("NUL"),
    ),
    Case(
        "check-utf16-in-tree",
        lambda d: _tree_with(d, lambda t: _write(t, "u16.py", "x = 1\n".encode("utf-16"))),
        ExitCode.INPUT_ERROR,
        _says("UTF-16"),
    ),
    Case(
        "check-latin1-without-cookie-in-tree",
        lambda d: _tree_with(d, lambda t: _write(t, "l1.py", "# caf\xe9\nx = 1\n".encode("latin-1"))),
        ExitCode.INPUT_ERROR,
        _says("l1.py:1:6", "coding"),
    ),
    Case(
        "check-syntax-error-named",
        lambda d: (_write(d, "bad.py", "x = (\n"), ["check", "bad.py"])[1],
        ExitCode.INPUT_ERROR,
        _says("bad.py:1"),
    ),
    Case(
        "check-250-nested-parentheses",
        lambda d: (
            _write(d, "p.py", FIXABLE + "\ny = " + "(" * 250 + "1" + ")" * 250 + "\n"),
            ["check", "--jax-version", OLD, "p.py"],
        )[1],
        ExitCode.INPUT_ERROR,
        _says("too many nested parentheses"),
    ),
    # check: valid Python, however deep or however stored, is analysed
    Case(
        "check-sum-of-350-terms",
        lambda d: (_write(d, "s.py", _deep("sum")), ["check", "--jax-version", OLD, "s.py"])[1],
        ExitCode.FINDINGS,
        _says("of `deep`"),
    ),
    Case(
        "check-calls-nested-150-deep",
        lambda d: (_write(d, "c.py", _deep("calls")), ["check", "--jax-version", OLD, "c.py"])[1],
        ExitCode.FINDINGS,
    ),
    Case(
        "check-attribute-chain-of-400",
        lambda d: (_write(d, "a.py", _deep("attributes")), ["check", "--jax-version", OLD, "a.py"])[1],
        ExitCode.FINDINGS,
    ),
    Case(
        "check-cr-only-with-coding-cookie",
        lambda d: (
            _write(
                d, "cr.py", ("# -*- coding: latin-1 -*-\n# caf\xe9\n" + FIXABLE).replace("\n", "\r").encode("latin-1")
            ),
            ["check", "--jax-version", OLD, "cr.py"],
        )[1],
        ExitCode.FINDINGS,
    ),
    # configuration and options
    Case(
        "config-not-utf8",
        lambda d: (_write(d, "pyproject.toml", b"\xff\xfe[tool]"), _write(d, "x.py", "x = 1\n"), ["check", "x.py"])[2],
        ExitCode.USAGE,
        _says("pyproject.toml"),
    ),
    Case(
        "config-binary", lambda d: (_write(d, "pyproject.toml", bytes(range(256))), ["check", "."])[1], ExitCode.USAGE
    ),
    Case(
        "config-fifo",
        lambda d: (_fifo(d, "cfg.toml"), ["check", "--config", "cfg.toml", "."])[1],
        ExitCode.USAGE,
        _says("FIFO"),
    ),
    Case(
        "config-jax-version-unsupported",
        lambda d: (_write(d, "pyproject.toml", '[tool.offload-fixer]\njax-version = "0.1"\n'), ["check", "."])[1],
        ExitCode.UNSUPPORTED_JAX,
    ),
    Case("flag-jax-version-unsupported", lambda d: ["check", "--jax-version", "banana", "."], ExitCode.UNSUPPORTED_JAX),
    Case("select-names-no-code", lambda d: ["check", "--select", ",,,", "."], ExitCode.USAGE, _says("names no code")),
    Case("select-unknown-code", lambda d: ["check", "--select", "OFL9999", "."], ExitCode.USAGE),
    Case("missing-path", lambda d: ["check", "no/such/path.py"], ExitCode.FINDINGS, _says("OFL0902")),
    Case("per-package-tables", _per_package, ExitCode.FINDINGS, _only_pkg_a),
    # check --fix: refusals
    Case("fix-append-only-file", _append_only, ExitCode.FIX_REFUSED, _untouched("locked.py")),
    Case("fix-read-only-file", _read_only, ExitCode.FIX_REFUSED, _untouched("ro.py")),
    Case(
        "fix-unsafe-without-consent",
        lambda d: (
            _write(d, "u.py", UNSAFE_FIXABLE),
            ["check", "--fix", "--jax-version", OLD, "--strategy", "host", "u.py"],
        )[1],
        ExitCode.FINDINGS,
        lambda d, done: (
            _untouched("u.py", UNSAFE_FIXABLE)(d, done)
            or _says("--unsafe-fixes")(d, done)
            or ("unsafe=True" in done.stderr and "a message names the Python API's unsafe=True")
            or None
        ),
    ),
    # fix REPORT
    Case("fix-report-fifo", lambda d: ["fix", str(_fifo(d, "report.json"))], ExitCode.INPUT_ERROR, _says("FIFO")),
    Case(
        "fix-report-not-json",
        lambda d: (_write(d, "report.json", "{not json"), ["fix", "report.json"])[1],
        ExitCode.INPUT_ERROR,
    ),
    Case(
        "fix-report-binary",
        lambda d: (_write(d, "report.json", b"\xff\xfe\x00"), ["fix", "report.json"])[1],
        ExitCode.INPUT_ERROR,
    ),
    Case(
        "fix-report-corrupt-field-type",
        lambda d: (
            _report(d, lambda r: r["reports"][0]["diagnostics"][0]["origin"]["span"].update(line="ten")),
            ["fix", "report.json"],
        )[1],
        ExitCode.INPUT_ERROR,
        _says("Span.line"),
    ),
    Case(
        "fix-report-diagnostics-not-a-list",
        lambda d: (_report(d, lambda r: r["reports"][0].update(diagnostics=7)), ["fix", "report.json"])[1],
        ExitCode.INPUT_ERROR,
    ),
    Case(
        "fix-report-missing-field",
        lambda d: (_report(d, lambda r: r.pop("target")), ["fix", "report.json"])[1],
        ExitCode.INPUT_ERROR,
    ),
    Case(
        "fix-report-file-cpython-cannot-compile",
        lambda d: (
            _report(d, lambda r: None, FIXABLE + "\ny = " + "(" * 250 + "1" + ")" * 250 + "\n"),
            ["fix", "--unsafe-fixes", "report.json"],
        )[1],
        ExitCode.INPUT_ERROR,
        _says("too many nested parentheses"),
    ),
    Case(
        "fix-report-unsupported-jax",
        lambda d: (_report(d, lambda r: r.update(jax_version="0.1")), ["fix", "--unsafe-fixes", "report.json"])[1],
        ExitCode.UNSUPPORTED_JAX,
    ),
    # run
    Case(
        "run-report-into-missing-directory",
        lambda d: (_write(d, "p.py", "open('ran', 'w').close()\n"), ["run", "--report", "no/dir/r.json", "p.py"])[1],
        ExitCode.USAGE,
        _report_marker_absent,
    ),
    Case(
        "run-program-ends-with-os-exit",
        lambda d: (
            _write(d, "p.py", RUNNABLE + "\nprint(scaled(jax.numpy.ones(2)))\nimport os\nos._exit(0)\n"),
            ["run", "--report", "report.json", "p.py"],
        )[1],
        ExitCode.FINDINGS,
        _report_written,
        needs_pinned_host=True,
    ),
    Case(
        "run-jit-in-a-thread-that-outlives-the-script",
        lambda d: (
            _write(
                d,
                "p.py",
                RUNNABLE + "\nimport threading, time\n\ndef later():\n    time.sleep(0.5)\n"
                "    print(scaled(jnp.ones(2)))\n\nthreading.Thread(target=later).start()\n",
            ),
            ["run", "--report", "report.json", "p.py"],
        )[1],
        ExitCode.FINDINGS,
        _report_written,
        needs_pinned_host=True,
    ),
    # explain
    Case("explain-log-is-a-directory", lambda d: ["explain", "."], ExitCode.INPUT_ERROR),
    Case("explain-missing-log", lambda d: ["explain", "no-such.log"], ExitCode.INPUT_ERROR),
    Case(
        "explain-unreadable-log",
        lambda d: (_unreadable(_write(d, "err.log", ERROR_LOG)), ["explain", "err.log"])[1],
        ExitCode.INPUT_ERROR,
        needs_unreadable=True,
    ),
    Case(
        "explain-dump-not-utf8",
        lambda d: _dump(d, {"module_0001.jit_f.before_optimizations.txt": b"\xff\xfe garbage"}),
        ExitCode.FINDINGS,
        _says("not UTF-8"),
    ),
    Case(
        "explain-dump-jax-ir-not-utf8",
        lambda d: _dump(d, {"jax_ir0001_jit_f_compile.mlir": b"\xffxx"}),
        ExitCode.FINDINGS,
    ),
    Case(
        "explain-dump-unreadable-file",
        lambda d: (
            _dump(d, {"module_0001.jit_f.before_optimizations.txt": b"HloModule m\n"}),
            _unreadable(d / "dump" / "module_0001.jit_f.before_optimizations.txt"),
        )[0],
        ExitCode.FINDINGS,
        _says("cannot read"),
        needs_unreadable=True,
    ),
    Case(
        "explain-dump-unreadable-directory",
        lambda d: (_dump(d, {}), _unreadable(d / "dump"))[0],
        ExitCode.INPUT_ERROR,
        needs_unreadable=True,
    ),
    # writes confined to the project and to the files named
    Case(
        "fix-report-path-leaves-the-project-by-dotdot",
        lambda d: _report_naming(d, "../outside/prog.py"),
        ExitCode.FIX_REFUSED,
        lambda d, done: (
            _unchanged("outside/prog.py")(d, done) or _says("../outside/prog.py", "outside the project")(d, done)
        ),
        cwd="proj",
    ),
    Case(
        "fix-report-absolute-path-outside-the-project",
        lambda d: _report_naming(d, str(d / "outside" / "prog.py")),
        ExitCode.FIX_REFUSED,
        lambda d, done: _unchanged("outside/prog.py")(d, done) or _says("outside the project")(d, done),
        cwd="proj",
    ),
    Case(
        "fix-report-path-a-symlink-out-of-the-project",
        _link_out,
        ExitCode.FIX_REFUSED,
        lambda d, done: _unchanged("outside/prog.py")(d, done) or _says("linked.py", "a symlink to")(d, done),
        cwd="proj",
    ),
    Case(
        "fix-report-path-not-python",
        lambda d: _report_naming(d, "notes.txt"),
        ExitCode.FIX_REFUSED,
        lambda d, done: _unchanged("proj/notes.txt")(d, done) or _says("notes.txt", "not a Python file")(d, done),
        cwd="proj",
    ),
    Case(
        "fix-report-without-hashes",
        lambda d: _report_naming(d, "prog.py", hashed=False),
        ExitCode.INPUT_ERROR,
        lambda d, done: _unchanged("proj/prog.py")(d, done) or _says("no sha256")(d, done),
        cwd="proj",
    ),
    Case(
        "fix-report-inside-the-project-is-fixed",
        lambda d: _report_naming(d, "prog.py"),
        ExitCode.CLEAN,
        lambda d, done: None if "out_shardings" in (d / "proj" / "prog.py").read_text() else "prog.py not fixed",
        cwd="proj",
    ),
    Case(
        "check-fix-tree-with-file-symlinks",
        _tree_linking_out,
        ExitCode.CLEAN,
        lambda d, done: (
            _unchanged("outside/prog.py")(d, done)
            or _says("Found 1 problem (1 fixed, 0 remaining)")(d, done)
            or ("again.py" in done.stdout + done.stderr and "the in-tree link was reported beside its file")
            or None
        ),
        cwd="proj",
    ),
    Case(
        "check-fix-summary-counts-only-what-was-written",
        _tree_with_read_only,
        ExitCode.FIX_REFUSED,
        _says("b.py: fix refused", "Found 2 problems (1 fixed, 1 remaining"),
    ),
    Case(
        "check-fix-form-feed-before-def",
        lambda d: (
            _write(d, "ff.py", FIXABLE.replace("def step", "\fdef step")),
            ["check", "--fix", "--unsafe-fixes", "--jax-version", OLD, "ff.py"],
        )[1],
        ExitCode.CLEAN,
        lambda d, done: (
            None
            if (text := (d / "ff.py").read_text()).count("def step") == 1 and "\fdef step" in text
            else f"the form feed or the def was not kept once: {text!r}"
        ),
    ),
    Case(
        # a jit site a host value reaches (out_shardings=host): the check must parse it
        "check-5000-implicit-concatenations",
        lambda d: (
            _write(d, "cat.py", FIXABLE + "\nS = jax.jit(len, out_shardings=host)(\n" + '    "x"\n' * 5000 + ")\n"),
            ["check", "--jax-version", OLD, "cat.py"],
        )[1],
        ExitCode.INPUT_ERROR,
        _says("cat.py", "libcst", "CPython compiles"),
    ),
    Case(
        # a statement that cannot hold a jit site is never parsed by libcst (static/candidates)
        "check-5000-implicit-concatenations-the-check-never-reads",
        lambda d: (
            _write(d, "cat.py", FIXABLE + "\nS = (\n" + '    "x"\n' * 5000 + ")\n"),
            ["check", "--jax-version", OLD, "cat.py"],
        )[1],
        ExitCode.FINDINGS,
        _says("cat.py:10:9", "OFL1200"),
    ),
    # notebooks
    Case(
        "notebook-cells-an-object-beside-a-python-file",
        lambda d: _notebook_beside_python(
            d, json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": {}})
        ),
        ExitCode.INPUT_ERROR,
        _says("nb.ipynb", "'cells' is dict", "tree/train.py:10:9"),
    ),
    Case(
        "notebook-json-5000-deep-beside-a-python-file",
        lambda d: _notebook_beside_python(d, "[" * 5000 + "]" * 5000),
        ExitCode.INPUT_ERROR,
        _says("nb.ipynb", "nested too deeply", "tree/train.py:10:9"),
    ),
    Case(
        "notebook-julia-kernel-skipped",
        lambda d: (_write(d, "jl.ipynb", _notebook(language="julia")), ["check", "--jax-version", OLD, "jl.ipynb"])[1],
        ExitCode.CLEAN,
        lambda d, done: (
            _untouched("jl.ipynb", _notebook(language="julia"))(d, done) or _says("julia", "skipped")(d, done)
        ),
    ),
    Case(
        "notebook-minor-4-with-cell-ids",
        lambda d: (_write(d, "old.ipynb", _notebook(minor=4)), ["check", "--jax-version", OLD, "old.ipynb"])[1],
        ExitCode.FINDINGS,
        _says("old.ipynb:cell 2:"),
    ),
    Case(
        "notebook-lone-cr-sources-fixed-in-their-cell",
        lambda d: (
            _write(d, "nb.ipynb", _notebook(newline="\r")),
            ["check", "--fix", "--unsafe-fixes", "--jax-version", OLD, "nb.ipynb"],
        )[1],
        ExitCode.CLEAN,
        _lone_cr_fixed,
    ),
    # hostile project files
    Case(
        "pyproject-nested-3000-deep",
        lambda d: (
            _write(d, "pyproject.toml", "a = " + "[" * 3000 + "]" * 3000 + "\n"),
            _write(d, "x.py", "x = 1\n"),
            ["check", "x.py"],
        )[2],
        ExitCode.USAGE,
        _says("pyproject.toml", "nested too deeply"),
    ),
    Case(
        "pyproject-a-fifo",
        lambda d: (_fifo(d, "pyproject.toml"), _write(d, "x.py", "x = 1\n"), ["check", "x.py"])[2],
        ExitCode.USAGE,
        _says("pyproject.toml", "FIFO"),
    ),
    Case(
        "pyproject-a-link-to-dev-zero",
        lambda d: (os.symlink("/dev/zero", d / "pyproject.toml"), _write(d, "x.py", "x = 1\n"), ["check", "x.py"])[2],
        ExitCode.USAGE,
        _says("pyproject.toml", "character device"),
    ),
)
