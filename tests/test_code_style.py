"""The project's code style, read from its ruff or black settings as those tools read them."""

from __future__ import annotations

from pathlib import Path

import pytest

from offload_fixer.code_style import CodeStyle, code_style_for


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_without_a_formatter_88_columns_and_the_files_own_quotes(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[project]\nname = 'p'\n")
    assert code_style_for(write(tmp_path / "p" / "train.py", "")) == CodeStyle(88, None, None)


def test_ruff_without_settings_its_defaults(tmp_path: Path) -> None:
    config = write(tmp_path / "ruff.toml", "")
    assert code_style_for(tmp_path / "train.py") == CodeStyle(88, '"', config)


def test_ruff_in_pyproject(tmp_path: Path) -> None:
    config = write(
        tmp_path / "pyproject.toml", '[tool.ruff]\nline-length = 80\n[tool.ruff.format]\nquote-style = "single"\n'
    )
    assert code_style_for(write(tmp_path / "src" / "pkg" / "train.py", "")) == CodeStyle(80, "'", config)


@pytest.mark.parametrize("name", [".ruff.toml", "ruff.toml"])
def test_a_ruff_file_wins_over_pyproject_in_its_folder(tmp_path: Path, name: str) -> None:
    write(tmp_path / "pyproject.toml", "[tool.ruff]\nline-length = 120\n")
    config = write(tmp_path / name, 'line-length = 79\n[format]\nquote-style = "preserve"\n')
    assert code_style_for(write(tmp_path / "train.py", "")) == CodeStyle(79, None, config)


def test_dot_ruff_toml_wins_over_ruff_toml(tmp_path: Path) -> None:
    write(tmp_path / "ruff.toml", "line-length = 100\n")
    config = write(tmp_path / ".ruff.toml", "line-length = 70\n")
    assert code_style_for(tmp_path / "train.py").line_length == 70
    assert code_style_for(tmp_path / "train.py").source == config


def test_the_nearest_configuration_wins(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.ruff]\nline-length = 120\n")
    write(tmp_path / "pkg" / "pyproject.toml", "[project]\nname = 'pkg'\n")  # no ruff table: looked past
    inner = write(tmp_path / "pkg" / "sub" / "ruff.toml", "line-length = 60\n")
    assert code_style_for(tmp_path / "pkg" / "sub" / "m.py") == CodeStyle(60, '"', inner)
    assert code_style_for(tmp_path / "pkg" / "m.py").line_length == 120


def test_extend_takes_the_base_and_overrides_it(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.ruff]\nline-length = 100\n[tool.ruff.format]\nquote-style = "single"\n')
    config = write(tmp_path / "pkg" / "ruff.toml", 'extend = "../pyproject.toml"\nline-length = 72\n')
    assert code_style_for(tmp_path / "pkg" / "m.py") == CodeStyle(72, "'", config)


def test_black(tmp_path: Path) -> None:
    config = write(tmp_path / "pyproject.toml", "[tool.black]\nline-length = 79\nskip-string-normalization = true\n")
    assert code_style_for(tmp_path / "m.py") == CodeStyle(79, None, config)
    write(tmp_path / "pyproject.toml", "[tool.black]\nline-length = 100\n[tool.ruff]\nline-length = 90\n")
    assert code_style_for(tmp_path / "m.py").line_length == 90  # ruff's table, where both are


def test_a_file_that_is_not_toml_says_nothing(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.ruff]\nline-length = 72\n")
    write(tmp_path / "pkg" / "ruff.toml", "line-length = = 3\n")
    assert code_style_for(tmp_path / "pkg" / "m.py").line_length == 72


def test_stdin_takes_the_working_directorys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "ruff.toml", "line-length = 66\n")
    monkeypatch.chdir(tmp_path)
    assert code_style_for("-").line_length == 66
