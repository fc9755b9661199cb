"""``offload_fixer.runner``: real programs run unchanged by ``offload-fixer run``, each distinct
jit compilation checked for TPU; expected findings are marked in the programs as ``# expect: CODE``."""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offload_fixer import jax_compat
from offload_fixer.exit_codes import ExitCode
from offload_fixer.findings import location
from offload_fixer.model import Report
from offload_fixer.report_file import read_report_file, sha256_of
from offload_fixer.runner import (
    CheckedJit,
    CompilationChecker,
    find_program,
    intercept_jit,
)
from tests.cli_support import REPO, environment, offload_fixer

PROGRAMS = REPO / "tests" / "runner_programs"
SUMMARY = re.compile(r"checked (?P<checked>\d+) distinct compilations? \((?P<intercepted>\d+) jit calls? intercepted\)")
EXPECT = re.compile(r"#\s*expect:\s*(?P<code>OFL\d{4})\s+(?P<output>\S+)")

needs_pinned_host = pytest.mark.skipif(
    not jax_compat.host_memory_on_this_backend(),
    reason=f"the CPU backend of jax {jax.__version__} has no pinned_host memory, so this program cannot run here",
)
needs_transfer_to_memory_kind = pytest.mark.skipif(
    not jax_compat.spelling().transfer_to_memory_kind,
    reason=f"TransferToMemoryKind does not exist in jax {jax.__version__} (removed in 0.7.1)",
)


def run_cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """``offload-fixer run --format json -o FILE ARGS``: the program's output on stdout and
    stderr as without the tool, the findings in ``proc.report`` (``None`` if none was written)."""
    with tempfile.TemporaryDirectory() as directory:
        output = Path(directory) / "findings.json"
        proc = offload_fixer("run", "--format", "json", "-o", str(output), *args, cwd=cwd)
        proc.report = Report.from_dict(json.loads(output.read_text())) if output.exists() else None
    return proc


def printed_findings(proc: subprocess.CompletedProcess) -> list[dict]:
    """Each diagnostic of the run: where it points, its code and output."""
    found = []
    for d in proc.report.diagnostics:
        span = location(d)
        found.append(
            {
                "path": str(Path(span.path).resolve()),
                "line": span.line,
                "code": d.code,
                "output": d.output_path,
                "severity": d.severity,
            }
        )
    return found


def marked_expectations(program: Path) -> set[tuple[int, str, str]]:
    expectations = set()
    for number, text in enumerate(program.read_text().splitlines(), start=1):
        match = EXPECT.search(text)
        if match:
            expectations.add((number, match["code"], match["output"].strip('"')))
    return expectations


def line_of(program: Path, text: str) -> int:
    return next(n for n, line in enumerate(program.read_text().splitlines(), start=1) if text in line)


def summary(stderr: str) -> tuple[int, int]:
    match = SUMMARY.search(stderr)
    assert match, stderr
    return int(match["checked"]), int(match["intercepted"])


def assert_marked_findings(program: Path, proc: subprocess.CompletedProcess, code: str = "OFL1200") -> None:
    """The ``code`` findings are exactly the lines marked ``# expect: CODE OUTPUT``."""
    expected = {(line, output) for line, c, output in marked_expectations(program) if c == code}
    printed = [f for f in printed_findings(proc) if f["code"] == code]
    assert expected and {(f["line"], f.get("output")) for f in printed} == expected, proc.report
    assert {f["path"] for f in printed} == {str(program)}


# ---------------------------------------------------------------------------------------
# Whole programs, in a subprocess
@pytest.mark.slow
def test_each_distinct_compilation_is_checked_once() -> None:
    program = PROGRAMS / "repeated_jit.py"
    proc = run_cli(str(program), "5")
    assert proc.returncode == ExitCode.FINDINGS, proc.stderr
    assert "done 5" in proc.stdout
    # sin_on_host at two shapes, add_one through a fresh jax.jit each step, scale_by with two
    # static values, raise_to with a static keyword: 6 compilations out of 5 * 4 + 2 calls.
    assert summary(proc.stderr) == (6, 22)
    assert_marked_findings(program, proc)
    assert [f["code"] for f in printed_findings(proc)].count("OFL1200") == 1
    assert "warning:" not in proc.stderr


@pytest.mark.slow
def test_python_m_offload_fixer_runner_is_the_run_command() -> None:
    """There is one ``run`` command line: ``python -m offload_fixer.runner`` hands its arguments
    to ``offload-fixer run`` (same report, same exit code), and its help is that command's."""
    program = str(PROGRAMS / "repeated_jit.py")
    installed = offload_fixer("run", "--format", "concise", program, "1")
    module = subprocess.run(
        [sys.executable, "-m", "offload_fixer.runner", "--format", "concise", program, "1"],
        cwd=REPO,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert installed.returncode == module.returncode == ExitCode.FINDINGS, module.stderr
    assert module.stdout == installed.stdout and "OFL1200" in module.stdout
    usage = subprocess.run(
        [sys.executable, "-m", "offload_fixer.runner", "--help"],
        cwd=REPO,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert usage.returncode == 0 and usage.stdout.startswith("Usage: offload-fixer run ")


@pytest.mark.slow
def test_gpu_target_reports_the_error_like_tpu() -> None:
    proc = run_cli("--target", "gpu", str(PROGRAMS / "repeated_jit.py"), "1")
    assert proc.returncode == ExitCode.FINDINGS, proc.stderr
    assert {(f["code"], f["severity"]) for f in printed_findings(proc)} >= {("OFL1200", "error")}
    assert {d.target for d in proc.report.diagnostics} == {"gpu"}
    assert (
        offload_fixer("run", "--target", "gpu", "--exit-zero", str(PROGRAMS / "repeated_jit.py"), "1").returncode == 0
    )


@pytest.mark.slow
def test_crashing_program_shows_its_own_traceback_and_a_distinct_exit_code() -> None:
    program = PROGRAMS / "crash.py"
    proc = run_cli(str(program))
    assert proc.returncode == ExitCode.PROGRAM_FAILED
    assert "total 6.0" in proc.stdout
    crash_line = line_of(program, "# expect-crash")
    assert f'File "{program}", line {crash_line}, in main' in proc.stderr
    assert "TypeError: dot_general requires contracting dimensions" in proc.stderr
    assert "runner.py" not in proc.stderr and "runpy" not in proc.stderr
    assert "offload-fixer: warning" not in proc.stderr  # the failed trace is the user's, not the tool's
    assert summary(proc.stderr) == (1, 2)
    assert "the program failed (exit code 1)" in proc.stderr


@pytest.mark.slow
def test_program_exit_status_is_reported() -> None:
    proc = run_cli(str(PROGRAMS / "crash.py"), "--exit", "4")
    assert proc.returncode == ExitCode.PROGRAM_FAILED
    assert "Traceback" not in proc.stderr
    assert "the program failed (exit code 4)" in proc.stderr


@pytest.mark.slow
def test_program_without_jit_checks_nothing() -> None:
    proc = run_cli(str(PROGRAMS / "no_jit.py"))
    assert proc.returncode == ExitCode.CLEAN, proc.stderr
    assert "total 45.0" in proc.stdout
    assert summary(proc.stderr) == (
        0,
        0,
    )  # eager jnp uses JAX's own jits, which are not the user's


@pytest.mark.slow
def test_module_runs_as_main() -> None:
    proc = run_cli("-m", "no_jit", cwd=PROGRAMS)  # found in the working directory, as python -m finds it
    assert proc.returncode == ExitCode.CLEAN, proc.stderr
    assert "total 45.0" in proc.stdout


@pytest.mark.slow
@needs_pinned_host
def test_ahead_of_time_lowering_on_shape_dtype_structs(tmp_path: Path) -> None:
    program = PROGRAMS / "aot_lower.py"
    report_path = tmp_path / "report.json"
    proc = run_cli("--report", str(report_path), str(program))
    assert proc.returncode == ExitCode.FINDINGS, proc.stderr
    assert "loss" in proc.stdout
    assert summary(proc.stderr) == (
        1,
        1,
    )  # .lower is checked; .eval_shape is not a compilation
    assert_marked_findings(program, proc)
    saved = read_report_file(str(report_path))
    errors = [d for r in saved.reports for d in r.diagnostics if d.code == "OFL1200"]
    assert errors and {d.output_path for d in errors} == {"[1]"}
    assert {d.origin.kind for d in errors} == {"host_argument"}
    assert {(d.function.name, d.function.path, d.function.line) for d in errors} == {
        ("train_step", str(program), line_of(program, "def train_step"))
    }


@pytest.mark.slow
@needs_transfer_to_memory_kind
def test_ahead_of_time_lowering_with_transfer_to_memory_kind() -> None:
    program = PROGRAMS / "transfer_to_host.py"
    proc = run_cli(str(program))
    assert proc.returncode == ExitCode.FINDINGS, proc.stderr
    assert summary(proc.stderr) == (1, 1)
    assert_marked_findings(program, proc)


@pytest.mark.slow
def test_tool_failure_is_a_warning_not_a_crash() -> None:
    proc = run_cli("--verbose", str(PROGRAMS / "cpu_only.py"))
    assert proc.returncode == ExitCode.CLEAN
    assert "eigenvalues [1.0, 2.0, 3.0]" in proc.stdout and "trace 6.0" in proc.stdout
    assert "offload-fixer: warning: could not check jit(eigenvalues) for tpu: NotImplementedError" in proc.stderr
    assert summary(proc.stderr) == (1, 2)


@pytest.mark.slow
def test_report_file_records_sources_for_the_fix_step(tmp_path: Path) -> None:
    program = tmp_path / "repeated_jit.py"
    shutil.copy(PROGRAMS / "repeated_jit.py", program)
    report_path = tmp_path / "out" / "report.json"
    report_path.parent.mkdir()
    proc = run_cli("--report", str(report_path), str(program), "2")
    assert proc.returncode == ExitCode.FINDINGS, proc.stderr
    data = json.loads(report_path.read_text())
    assert data["version"] == 1 and data["target"] == "tpu" and data["jax_version"] == jax.__version__
    assert data["sources"] == {str(program): sha256_of(str(program))}
    saved = read_report_file(str(report_path))
    error = next(d for r in saved.reports for d in r.diagnostics if d.code == "OFL1200")
    assert error.origin.kind == "move_to_host"
    assert error.function.path == str(program)
    assert error.function.line == line_of(program, "def sin_on_host")
    assert error.origin.span.line == line_of(program, "# expect: OFL1200")
    assert error.origin.span.path == str(program)
    assert error.output_path == ""
    assert saved.stale_sources() == []
    program.write_text(program.read_text() + "\n# edited after the run\n")
    assert saved.stale_sources() == [str(program)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, code",
    [
        ([], ExitCode.USAGE),
        (["--target", "cpu", "x.py"], ExitCode.USAGE),
        (["does_not_exist.py"], ExitCode.INPUT_ERROR),
        (["-m", "no_such_module_anywhere"], ExitCode.INPUT_ERROR),
    ],
)
def test_bad_command_lines_and_missing_programs(args: list[str], code: ExitCode) -> None:
    proc = offload_fixer("run", *args)
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_module_is_found_in_the_working_directory_as_python_m_finds_it(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text("print('trained')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", str(tmp_path))])
    find_program("pkg.train", is_module=True)
    proc = offload_fixer("run", "-m", "pkg.train", cwd=tmp_path)
    assert proc.returncode == ExitCode.CLEAN, proc.stderr
    assert proc.stdout.startswith("trained\n")


def test_report_file_of_another_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"version": 2, "target": "tpu", "jax_version": "0.10.2", "reports": []}))
    with pytest.raises(ValueError, match="version 1"):
        read_report_file(str(path))


# ---------------------------------------------------------------------------------------
# The stand-in for jax.jit, in this process
def scale(x, factor):
    return x * factor


def test_stand_in_behaves_like_the_jitted_function() -> None:
    real_jit = jax.jit
    checker = CompilationChecker("tpu")
    x = jnp.ones(4)
    with intercept_jit(checker):
        from jax import jit

        jitted = jit(scale, static_argnums=1)
        assert isinstance(jitted, CheckedJit)
        assert jitted.__wrapped__ is scale and jitted.__name__ == "scale"
        assert list(inspect.signature(jitted).parameters) == ["x", "factor"]
        assert jitted.eval_shape(x, 2).shape == (4,)
        assert checker.result.checked == 0
        np.testing.assert_allclose(jitted(x, 2), 2 * np.ones(4))
        jitted(x, 2)
        jitted(np.ones(4, np.float32) * 3, 2)  # NumPy, not a jax.Array: a different compilation
        assert (checker.result.checked, checker.result.intercepted) == (2, 3)
        assert jitted.lower(jax.ShapeDtypeStruct((4,), jnp.float32), 5).compile()(x).shape == (4,)
        assert checker.result.checked == 3
    assert jax.jit is real_jit
    jitted(x, 7)  # after the run: delegates only
    assert (checker.result.checked, checker.result.intercepted) == (3, 4)


def test_stand_in_binds_methods_and_skips_calls_inside_a_trace() -> None:
    checker = CompilationChecker("tpu")
    with intercept_jit(checker):

        class Model:
            @functools.partial(jax.jit, static_argnums=0)
            def apply(self, x):
                return x + 1

        @jax.jit
        def outer(x):
            return inner(x) * 2

        @jax.jit
        def inner(x):
            return x - 1

        assert float(Model().apply(jnp.float32(1))) == 2.0
        assert float(outer(jnp.float32(3))) == 4.0
    # model.apply and outer; inner runs inside outer's trace, part of outer's compilation
    assert (checker.result.checked, checker.result.intercepted) == (2, 2)


def test_decorator_form_of_jit_goes_through_the_stand_in() -> None:
    if inspect.signature(jax.jit).parameters["fun"].default is inspect.Parameter.empty:
        pytest.skip(f"jax {jax.__version__} has no jax.jit(**options) decorator form")
    checker = CompilationChecker("tpu")
    with intercept_jit(checker):

        @jax.jit(static_argnames="factor")
        def times(x, factor):
            return x * factor

        assert isinstance(times, CheckedJit)
        times(jnp.ones(2), factor=3)
        times(jnp.ones(2), factor=3)
    assert checker.result.checked == 1


# ---------------------------------------------------------------------------------------
# Where the program ends the process itself
FINISHER = (
    "import sys\n"
    "from offload_fixer.runner import run_program\n"
    "def finish(result):\n"
    "    print('finished', result.program_exit_code, result.checked, flush=True)\n"
    "    sys.exit(7)\n"
    "result = run_program(sys.argv[1], finish=finish)\n"
    "if not result.deferred:\n"
    "    finish(result)\n"
)
JITTED = "import jax, jax.numpy as jnp\n@jax.jit\ndef double(x):\n    return x * 2\n"


def _finish_of(tmp_path: Path, program: str) -> subprocess.CompletedProcess:
    script = tmp_path / "program.py"
    script.write_text(program)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.run(
        [sys.executable, "-c", FINISHER, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_finish_runs_when_the_program_calls_os_exit(tmp_path: Path) -> None:
    done = _finish_of(tmp_path, JITTED + "print(double(jnp.ones(2)))\nimport os\nos._exit(3)\nprint('not reached')\n")
    assert "finished 3 1" in done.stdout and "not reached" not in done.stdout, done.stderr
    assert done.returncode == 7  # what finish exits with


def test_a_forked_childs_os_exit_is_its_own(tmp_path: Path) -> None:
    done = _finish_of(tmp_path, "import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)\n")
    assert done.stdout.count("finished") == 1 and "finished 0" in done.stdout, done.stderr


@pytest.mark.parametrize("end", ["sys.exit(4)", "pass", "raise RuntimeError('in the child')"])
def test_a_forked_child_ends_as_the_program_says_and_never_finishes_the_run(tmp_path: Path, end: str) -> None:
    program = f"import os, sys\npid = os.fork()\nif pid == 0:\n    {end}\nelse:\n    os.waitpid(pid, 0)\n"
    done = _finish_of(tmp_path, program)
    assert done.stdout.count("finished") == 1 and "finished 0" in done.stdout, done.stdout + done.stderr
    assert ("RuntimeError: in the child" in done.stderr) == end.startswith("raise")


def test_a_jit_first_called_at_exit_is_checked_before_the_run_finishes(tmp_path: Path) -> None:
    program = JITTED + (
        "import atexit\n"
        "atexit.register(lambda: print('at exit', double(jnp.ones(2)), flush=True))\n"
        "atexit.register(lambda: 1 / 0)\n"
        "print('main done', flush=True)\n"
    )
    done = _finish_of(tmp_path, program)
    assert done.stdout.index("main done") < done.stdout.index("at exit") < done.stdout.index("finished 0 1")
    assert "ZeroDivisionError" in done.stderr  # a failing handler is reported, the others still run
    assert done.returncode == 7


KEEPER = (
    "import os, sys\n"
    "START = os.getcwd()\n"
    "import offload_fixer.model\n"
    "from offload_fixer.runner import run_program\n"
    "result = run_program(sys.argv[1])\n"
    "import difflib\n"
    "print('modules kept', sys.modules['offload_fixer.model'] is offload_fixer.model, file=sys.__stdout__)\n"
    "print('stdout kept', sys.stdout is sys.__stdout__, file=sys.__stdout__)\n"
    "print('directory kept', os.getcwd() == START, result.checked, file=sys.__stdout__)\n"
)


def test_the_run_keeps_its_modules_streams_and_directory_whatever_the_program_does(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    script = tmp_path / "program.py"
    script.write_text(
        JITTED + "import io, os, sys\n"
        "print(double(jnp.ones(2)))\n"
        "for name in [n for n in sys.modules if n.startswith('offload_fixer')]:\n"
        "    del sys.modules[name]\n"
        "sys.modules['difflib'] = None\n"
        "sys.stdout = io.StringIO()\n"
        "os.chdir('elsewhere')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(
        [sys.executable, "-c", KEEPER, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert "modules kept True" in done.stdout and "stdout kept True" in done.stdout, done.stdout + done.stderr
    assert "directory kept True 1" in done.stdout, done.stdout + done.stderr


def test_threads_the_program_leaves_running_are_waited_for_and_checked(tmp_path: Path) -> None:
    program = JITTED + (
        "import threading, time\n"
        "def later():\n"
        "    time.sleep(0.5)\n"
        "    print('thread done', double(jnp.ones(2)), flush=True)\n"
        "threading.Thread(target=later).start()\n"
    )
    done = _finish_of(tmp_path, program)
    assert done.stdout.index("thread done") < done.stdout.index("finished 0 1"), done.stdout + done.stderr
    assert done.returncode == 7


def test_a_keyboard_interrupt_in_the_program_is_marked(tmp_path: Path) -> None:
    from offload_fixer.runner import run_program

    script = tmp_path / "interrupted.py"
    script.write_text("raise KeyboardInterrupt\n")
    result = run_program(str(script))
    assert result.interrupted and result.program_exit_code == 1 and "KeyboardInterrupt" in result.program_exception


def test_a_corrupt_report_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "target": "tpu",
                "jax_version": "0.10.2",
                "sources": {},
                "reports": [
                    {
                        "target": "tpu",
                        "jax_version": "0.10.2",
                        "diagnostics": [
                            {
                                "code": "OFL1200",
                                "severity": "error",
                                "target": "tpu",
                                "message": "m",
                                "explanation": "e",
                                "span": {"path": "x.py", "line": "ten"},
                            }
                        ],
                    }
                ],
            }
        )
    )
    with pytest.raises(ValueError, match=r"Span\.line: expected int"):
        read_report_file(str(path))


@pytest.mark.slow
@needs_pinned_host
@pytest.mark.skipif(
    not hasattr(jax, "memory"), reason="the program moves its state with jax.memory.Space (JAX >= 0.10)"
)
@pytest.mark.parametrize("moved", [False, True], ids=["host-compute", "moved-to-device"])
def test_a_call_that_would_abort_the_process_stops_the_program_with_its_findings(moved: bool) -> None:
    """PjRt aborts a process whose compiled program returns a donated host buffer as a device
    output (no Python exception, no report): ``run`` stops the program at that call instead and
    reports what it found, with why it stopped, at the user's line."""
    program = PROGRAMS / "donated_host_state.py"
    proc = run_cli(str(program), *(["--moved"] if moved else []))
    assert proc.returncode == ExitCode.PROGRAM_FAILED, proc.stderr
    assert "compiled" in proc.stdout and "stepped" not in proc.stdout
    call = line_of(program, "new_params, _ = step(")
    assert f"{program.name}:{call}:" in proc.stderr
    assert (
        "would abort the process: JAX reuses the donated pinned_host buffer of mu for output result[0]" in proc.stderr
    )
    assert "the program was stopped where it would abort the process" in proc.stderr
    assert "Traceback" not in proc.stderr
    codes = {(f["code"], f["severity"]) for f in printed_findings(proc)}
    assert (("OFL1200", "error") in codes) != moved  # moved to device, the step compiles on TPU
