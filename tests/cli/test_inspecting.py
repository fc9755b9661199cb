"""``check --show-settings`` and ``--show-files``: what the check would use, as ruff shows it."""

from __future__ import annotations

from pathlib import Path

from offload_fixer.exit_codes import ExitCode
from tests.cli.programs import BROKEN
from tests.cli_support import offload_fixer


def test_show_files_lists_what_the_check_reads(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.offload-fixer]\nextend-exclude = ["generated"]\n')
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "model.py").write_text(BROKEN)
    (tmp_path / "b.py").write_text(BROKEN)
    (tmp_path / "a.py").write_text("x = 1\n")
    shown = offload_fixer("check", "--show-files", ".", cwd=tmp_path)
    assert (shown.returncode, shown.stdout) == (ExitCode.CLEAN, f"{tmp_path / 'a.py'}\n{tmp_path / 'b.py'}\n")


def test_show_settings_spells_them_as_the_table_does(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\nrequires-python = ">=3.11"\n\n[tool.offload-fixer]\ntarget = "gpu"\nignore = ["OFL1201"]\n'
    )
    (tmp_path / "a.py").write_text("x = 1\n")
    shown = offload_fixer("check", "--show-settings", "--select", "OFL12", "a.py", cwd=tmp_path)
    assert shown.returncode == ExitCode.CLEAN
    lines = shown.stdout.splitlines()
    assert lines[:2] == [
        f'Resolved settings for: "{tmp_path / "a.py"}"',
        f'Settings path: "{tmp_path / "pyproject.toml"}"',
    ]
    for line in ('target = "gpu"', 'select = ["OFL12"]', 'ignore = ["OFL1201"]', 'target-version = "py311"'):
        assert line in lines, shown.stdout
