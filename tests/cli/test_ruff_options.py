"""ruff's options and spellings, through the installed command (in a terminal where the
output is the point): ``--silent``, ``--extend-select``, ``--config KEY=VALUE``,
``--output-format full``, ``rule CODE`` and ``# noqa``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from offload_fixer import jax_compat
from offload_fixer.exit_codes import ExitCode
from tests.cli.programs import BROKEN
from tests.cli_support import REPO, in_terminal, offload_fixer

needs_pty = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
RUFF = shutil.which("ruff", path=os.path.dirname(sys.executable))
needs_ruff = pytest.mark.skipif(
    RUFF is None, reason="ruff (the lint extra, pinned in constraints.txt) is not installed"
)
COLOUR = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture()
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.py"
    path.write_text(BROKEN)
    return path


@needs_pty
def test_silent_prints_nothing_and_exits_with_the_findings(broken: Path):
    assert in_terminal("check", "--silent", "broken.py", cwd=broken.parent) == (ExitCode.FINDINGS, "")
    (broken.parent / "bad.py").write_text("x = (\n")
    assert in_terminal("check", "-s", "bad.py", cwd=broken.parent) == (ExitCode.INPUT_ERROR, "")  # the status says it


@needs_pty
def test_output_format_full_is_the_text_report(broken: Path):
    # --no-cache: both runs analyse the file, so neither is told apart by a progress line
    full = in_terminal(
        "check", "--no-cache", "--output-format", "full", "--color", "never", "broken.py", cwd=broken.parent
    )
    text = in_terminal("check", "--no-cache", "--color", "never", "broken.py", cwd=broken.parent)
    assert _without_progress(full) == _without_progress(text) and "OFL1200 [*] [error]" in full[1]


def _without_progress(result: tuple[int, str]) -> tuple[int, str]:
    """The screen less the progress line a slower run draws (and erases) on the terminal."""
    code, screen = result
    return code, re.sub(r"\r\x1b\[2KChecking[^\r]*", "", screen).replace("\r\x1b[2K", "")


def test_extend_select_adds_to_select(broken: Path):
    only_1204 = offload_fixer("check", "--select", "OFL1204", "broken.py", cwd=broken.parent)
    assert only_1204.returncode == ExitCode.CLEAN
    both = offload_fixer("check", "--select", "OFL1204", "--extend-select", "OFL1200", "broken.py", cwd=broken.parent)
    assert both.returncode == ExitCode.FINDINGS and "OFL1200" in both.stdout


def test_config_takes_a_setting_as_toml(broken: Path):
    # the multiply on the host argument is OFL1201 next to OFL1200
    ignored = offload_fixer("check", "--config", 'ignore = ["OFL1200", "OFL1201"]', "broken.py", cwd=broken.parent)
    assert ignored.returncode == ExitCode.CLEAN, ignored.stdout + ignored.stderr
    flag_wins = offload_fixer(
        "check", "--config", 'select = ["OFL1204"]', "--select", "OFL1200", "broken.py", cwd=broken.parent
    )
    assert flag_wins.returncode == ExitCode.FINDINGS
    wrong = offload_fixer("check", "--config", 'selct = ["OFL1200"]', "broken.py", cwd=broken.parent)
    assert wrong.returncode == ExitCode.USAGE and "did you mean 'select'?" in wrong.stderr


@needs_pty
def test_rule_is_rules(broken: Path):
    assert in_terminal("rule", "OFL1200") == in_terminal("rules", "OFL1200")
    code, screen = in_terminal("rule", "OFL1200")
    assert code == 0 and screen.startswith("# OFL1200")


@needs_pty
def test_noqa_with_our_code_silences_and_an_unused_one_is_reported(broken: Path):
    broken.write_text(
        # OFL1201 (the multiply) has its origin on that line too
        BROKEN.replace("in_shardings=HOST)", "in_shardings=HOST)  # noqa: OFL1200, OFL1201")
        + "y = 1  # noqa: OFL1204\n"
    )
    code, screen = in_terminal("check", "--color", "never", "broken.py", cwd=broken.parent)
    assert code == ExitCode.CLEAN and "OFL1200 [" not in screen and "OFL1201 [" not in screen, screen
    assert "broken.py:12:8: warning: unused `# noqa`: OFL1204" in screen
    broken.write_text(BROKEN.replace("in_shardings=HOST)", "in_shardings=HOST)  # noqa"))
    assert in_terminal("check", "broken.py", cwd=broken.parent)[0] == ExitCode.CLEAN
    broken.write_text(BROKEN.replace("in_shardings=HOST)", "in_shardings=HOST)  # noqa: E501"))
    assert in_terminal("check", "broken.py", cwd=broken.parent)[0] == ExitCode.FINDINGS  # another tool's


@needs_pty
@pytest.mark.skipif(
    not jax_compat.host_memory_on_this_backend(), reason="the program runs on pinned_host memory, which this CPU lacks"
)
def test_fix_report_says_what_is_left_as_check_does(tmp_path: Path):
    """``fix REPORT`` closes with ``check --fix``'s words (a report written by ``run``)."""
    program = tmp_path / "train.py"
    program.write_text(
        BROKEN
        + '\n\nif __name__ == "__main__":\n    print(double.trace(jax.ShapeDtypeStruct((4,), "float32")).lower())\n'
    )
    assert offload_fixer("run", "-q", "--report", "run.json", "train.py", cwd=tmp_path).returncode == ExitCode.FINDINGS
    code, screen = in_terminal("fix", "--color", "never", "run.json", cwd=tmp_path)
    # error 1200 and the multiply on host, both fixed by one move back to device
    assert code == ExitCode.CLEAN and "Found 2 problems (2 fixed, 0 remaining)." in screen, screen
    assert "Fixed 2 problems." not in screen
    # every path as the other messages give it (relative), and no plugin's start-up lines
    assert "offload-fixer: train.py: fixed" in screen and str(tmp_path) not in screen, screen
    assert "Traceback" not in screen and "plugin" not in screen
    code, screen = in_terminal("fix", "--color", "never", "run.json", cwd=tmp_path)
    assert code == ExitCode.FIX_REFUSED, screen
    # the reason alone: the file changed since the run, whatever plan would have been tried
    refusal = "offload-fixer: train.py: fix refused: changed since it was analysed; analyse it again before fixing"
    assert refusal in screen and "candidate" not in screen, screen


@needs_pty
def test_explain_help_describes_its_own_confirm():
    code, screen = in_terminal("explain", "--help", columns=200)
    assert code == 0 and "--confirm" in screen and "--dump" in screen
    assert "--fix" not in screen and "--diff" not in screen


@needs_pty
def test_explain_says_every_released_gpu_compiler_refuses(tmp_path: Path):
    log = tmp_path / "err.log"
    log.write_text(
        "jaxlib.xla_extension.XlaRuntimeError: INVALID_ARGUMENT: Tensor which is moved to host (starting from "
        "tuple.64) is returned from the entry computation but the layout for this output is not set to host memory.\n"
    )
    code, screen = in_terminal("explain", str(log), columns=200)
    assert code == ExitCode.FINDINGS, screen
    assert "every released TPU and GPU compiler refuses" in " ".join(screen.split()) and "older XLA" not in screen


def ruff(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The pinned ruff (``constraints.txt``), whose behaviour the cases below copy."""
    assert RUFF is not None
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [RUFF, "check", "--no-cache", *args], cwd=cwd, capture_output=True, text=True, env=env, check=False
    )


@needs_ruff
@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ((), ()),
        (("--exit-zero",), ("--exit-zero",)),
        (("--statistics",), ("--statistics",)),
        (("--output-format", "concise"), ("--output-format", "concise")),
        (("--silent",), ("--silent",)),
        (("--select", "OFL1200"), ("--select", "F401")),  # the code of a path that cannot be read not selected
    ],
    ids=["default", "exit-zero", "statistics", "concise", "silent", "not-selected"],
)
@pytest.mark.parametrize("alone", [False, True], ids=["with-a-finding", "alone"])
def test_a_missing_path_is_one_finding_among_the_others_as_in_ruff(
    tmp_path: Path, ours: tuple[str, ...], theirs: tuple[str, ...], alone: bool
):
    """ruff's E902: the path is a finding of its own code, every other path is still checked and
    reported, the exit status is the findings'; not selected, a warning names it on stderr."""
    (tmp_path / "broken.py").write_text(BROKEN)  # OFL1200 for offload-fixer
    (tmp_path / "lint.py").write_text("import os\n")  # F401 for ruff
    mine = offload_fixer("check", "--no-cache", *ours, "nosuch.py", *([] if alone else ["broken.py"]), cwd=tmp_path)
    reference = ruff(*theirs, "nosuch.py", *([] if alone else ["lint.py"]), cwd=tmp_path)
    assert mine.returncode == reference.returncode, (mine.stdout + mine.stderr, reference.stdout + reference.stderr)
    for stream in ("stdout", "stderr"):
        assert ("nosuch.py" in getattr(mine, stream)) == ("nosuch.py" in getattr(reference, stream)), stream
    assert ("broken.py" in mine.stdout) == ("lint.py" in reference.stdout)
    assert ("OFL0902" in mine.stdout) == ("E902" in reference.stdout)
    assert "Traceback" not in mine.stderr


FIXABLE = (REPO / "examples" / "unpinned_host_trap.py").read_text()
"""Three findings ``--fix`` fixes all of (the ``unpinned_host`` trap), as F401 is for ruff."""
UNUSED_IMPORT = "import os\n"


@needs_ruff
@pytest.mark.parametrize(
    "flags",
    [
        ("--fix-only",),
        ("--fix-only", "--exit-non-zero-on-fix"),
        ("--fix", "--exit-non-zero-on-fix"),
        ("--fix", "--no-fix"),
        ("--no-fix", "--fix"),
        ("--fix-only", "--no-fix-only"),
        ("--fix-only", "--quiet"),
        ("--fix-only", "--diff"),
        ("-n",),
        ("--exit-zero", "--exit-non-zero-on-fix"),
    ],
    ids=" ".join,
)
@pytest.mark.parametrize("clean", [False, True], ids=["fixable", "clean"])
def test_the_fix_flags_are_ruffs(tmp_path: Path, flags: tuple[str, ...], clean: bool):
    """``--fix-only``, ``--no-fix``, ``--exit-non-zero-on-fix`` and ``-n`` as the pinned ruff has
    them: the same exit status, the same file written or not, the same stream for what is left
    (``Fixed N problems.`` for ruff's ``Fixed N errors.``), and ``-n`` keeps no cache."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir(), theirs.mkdir()
    (ours / "step.py").write_text(CLEAN_STEP if clean else FIXABLE)
    (theirs / "lint.py").write_text("x = 1\n" if clean else UNUSED_IMPORT)
    mine = offload_fixer("check", *flags, "step.py", cwd=ours, OFFLOAD_FIXER_NO_CACHE="")
    reference = subprocess.run(
        [RUFF, "check", "--select", "F401", *flags, "lint.py"], cwd=theirs, capture_output=True, text=True, check=False
    )
    assert mine.returncode == reference.returncode, (mine.stdout + mine.stderr, reference.stdout + reference.stderr)
    assert ((ours / "step.py").read_text() != (CLEAN_STEP if clean else FIXABLE)) == (
        (theirs / "lint.py").read_text() != ("x = 1\n" if clean else UNUSED_IMPORT)
    )
    said = {name: bool(getattr(mine, name).strip()) for name in ("stdout", "stderr")}
    assert said == {name: bool(getattr(reference, name).strip()) for name in ("stdout", "stderr")}, (mine, reference)
    if reference.stdout.startswith("Fixed "):
        assert mine.stdout.startswith("Fixed ") and mine.stdout.endswith(" problems.\n"), mine.stdout
    assert (ours / ".offload-fixer-cache").exists() == (theirs / ".ruff_cache").exists()


CLEAN_STEP = "import jax\n\n\n@jax.jit\ndef step(x):\n    return x + 1\n"


@needs_ruff
def test_fix_only_on_stdin_writes_the_source_and_says_what_it_fixed(tmp_path: Path):
    mine = offload_fixer("check", "--fix-only", "-", stdin=FIXABLE, cwd=tmp_path)
    reference = subprocess.run(
        [RUFF, "check", "--no-cache", "--select", "F401", "--fix-only", "-"],
        input=UNUSED_IMPORT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (mine.returncode, reference.returncode) == (0, 0)
    assert reference.stdout == "" and reference.stderr == "Fixed 1 error.\n"
    assert 'memory_kind="pinned_host"' in mine.stdout and 'memory_kind="unpinned_host"' not in mine.stdout
    assert mine.stderr == "Fixed 3 problems.\n"
