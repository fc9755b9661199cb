"""``[tool.offload-fixer]``: discovery, cascading, validation, selection and exclusion."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from offload_fixer.config import (
    DEFAULT_EXCLUDE,
    ConfigError,
    Settings,
    SettingsResolver,
    find_config,
    is_excluded,
    load_settings,
    select_codes,
)
from offload_fixer.model import Diagnostic, Span
from tests.jax_versions import NEWEST_NAMED, NEXT_MINOR


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _diagnostic(code: str) -> Diagnostic:
    return Diagnostic(code=code, severity="error", target="tpu", message="m", explanation="e")


def test_defaults():
    settings = Settings()
    assert (settings.target, settings.strategy, settings.format, settings.jobs) == ("tpu", "auto", "text", 0)
    assert settings.select is None and settings.ignore == ()
    assert ".venv" in settings.exclude and settings.jax_version is None


def test_reads_every_key(tmp_path):
    config = _write(
        tmp_path / "pyproject.toml",
        """
[project]
name = "demo"

[tool.offload-fixer]
target = "gpu"
strategy = "host"
select = ["OFL120"]
ignore = ["ofl1206"]
exclude = ["generated"]
extend-exclude = ["legacy/*.py"]
jax-version = "0.4.35"
format = "sarif"
jobs = 4
""",
    )
    settings = load_settings(config)
    assert settings.target == "gpu" and settings.strategy == "host"
    assert settings.select == ("OFL120",) and settings.ignore == ("OFL1206",)
    assert settings.exclude == ("generated",) and settings.extend_exclude == ("legacy/*.py",)
    assert settings.jax_version == "0.4.35" and settings.format == "sarif" and settings.jobs == 4
    assert settings.root == tmp_path.resolve() and settings.config_path == config.resolve()


@pytest.mark.parametrize(
    "body, message",
    [
        ('jax_version = "0.4.35"', "unknown key 'jax_version'.*did you mean 'jax-version'"),
        ('colour = "always"', "unknown key 'colour'.*known keys"),
        ('target = "cpu"', "target: expected one of 'tpu', 'gpu', 'gpu-legacy', got 'cpu'"),
        ('strategy = "both"', "strategy: expected one of"),
        ('format = "xml"', "format: expected one of"),
        ('select = ["E501"]', "select: 'E501' selects no rule"),
        ('ignore = "OFL1299"', "ignore: 'OFL1299' selects no rule.*did you mean"),
        ("exclude = [1, 2]", "exclude: expected a list of strings"),
        ('jax-version = "latest"', "jax-version: not a JAX version"),
        ('jax-version = "0.3.25"', "jax-version: JAX 0.3.25 predates memory kinds"),
        (
            f'jax-version = "{NEXT_MINOR}"',
            f"jax-version: JAX {re.escape(NEXT_MINOR)} is newer than what offload-fixer models .{re.escape(NEWEST_NAMED)},",
        ),
        ('per-file-ignores = ["OFL1200"]', "per-file-ignores: expected a table"),
        ('per-file-ignores = { "tests/**" = ["E501"] }', "per-file-ignores.'tests/..': 'E501' selects no rule"),
        ("jobs = -1", "jobs: expected a whole number"),
        ("jobs = true", "jobs: expected a whole number"),
    ],
)
def test_bad_values_name_the_file_and_key(tmp_path, body, message):
    config = _write(tmp_path / "pyproject.toml", f"[tool.offload-fixer]\n{body}\n")
    with pytest.raises(ConfigError, match=message) as caught:
        load_settings(config)
    assert str(config.resolve()) in str(caught.value)


def test_broken_toml_and_misspelt_table(tmp_path):
    _write(tmp_path / "a" / "pyproject.toml", "[tool.offload-fixer\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        find_config(tmp_path / "a")
    _write(tmp_path / "b" / "pyproject.toml", '[tool.offload_fixer]\ntarget = "gpu"\n')
    with pytest.raises(ConfigError, match=r"spelled \[tool.offload-fixer\]"):
        find_config(tmp_path / "b")


def test_nearest_table_wins_and_tables_without_ours_are_skipped(tmp_path):
    _write(tmp_path / "pyproject.toml", '[tool.offload-fixer]\ntarget = "gpu"\nselect = ["OFL1200"]\n')
    _write(tmp_path / "pkg" / "pyproject.toml", '[tool.offload-fixer]\ntarget = "gpu-legacy"\n')
    _write(tmp_path / "pkg" / "sub" / "pyproject.toml", "[tool.ruff]\nline-length = 100\n")
    source = _write(tmp_path / "pkg" / "sub" / "mod.py", "x = 1\n")
    other = _write(tmp_path / "other" / "mod.py", "x = 1\n")

    assert find_config(source) == (tmp_path / "pkg" / "pyproject.toml").resolve()
    resolver = SettingsResolver()
    inner = resolver.settings_for(source)
    assert inner.target == "gpu-legacy"
    assert inner.select is None, "nearest table wins whole: no inheritance from the outer table"
    outer = resolver.settings_for(other)
    assert outer.target == "gpu" and outer.select == ("OFL1200",)
    assert resolver.settings_for(tmp_path / "pkg" / "sub") is inner


def test_no_config_gives_defaults(tmp_path):
    source = _write(tmp_path / "mod.py", "x = 1\n")
    if find_config(tmp_path) is not None:
        pytest.skip("a directory above the temporary directory declares [tool.offload-fixer]")
    settings = SettingsResolver().settings_for(source)
    assert settings == Settings(root=Path.cwd())


def test_command_line_overrides_the_file(tmp_path):
    config = _write(tmp_path / "pyproject.toml", '[tool.offload-fixer]\ntarget = "gpu"\njobs = 2\n')
    resolver = SettingsResolver(overrides={"target": "tpu", "jobs": None, "ignore": ["OFL1201"]})
    settings = resolver.settings_for(config.parent / "x.py")
    assert settings.target == "tpu" and settings.jobs == 2 and settings.ignore == ("OFL1201",)
    with pytest.raises(ConfigError, match="command line: target"):
        Settings().with_overrides(target="cuda")
    with pytest.raises(TypeError, match="not a setting: colour"):
        Settings().with_overrides(colour="always")


def test_explicit_config_applies_everywhere(tmp_path):
    config = _write(tmp_path / "conf" / "pyproject.toml", '[tool.offload-fixer]\ntarget = "gpu"\n')
    _write(tmp_path / "proj" / "pyproject.toml", '[tool.offload-fixer]\ntarget = "tpu"\n')
    resolver = SettingsResolver(config=config)
    assert resolver.settings_for(tmp_path / "proj" / "a.py").target == "gpu"


@pytest.mark.parametrize(
    "select, ignore, kept",
    [
        (None, (), ["OFL1200", "OFL1201", "OFL1206"]),
        (["OFL1200"], (), ["OFL1200"]),
        (["OFL12"], ["OFL1201"], ["OFL1200", "OFL1206"]),
        (["ALL"], ["OFL120"], []),
        (["OFL1201"], ["OFL120"], ["OFL1201"]),  # the more specific select wins
        (["OFL1201"], ["OFL1201"], []),  # a tie goes to ignore
        (["ofl1206"], (), ["OFL1206"]),
    ],
)
def test_select_codes(select, ignore, kept):
    diagnostics = [_diagnostic(code) for code in ("OFL1200", "OFL1201", "OFL1206")]
    assert [d.code for d in select_codes(diagnostics, select, ignore)] == kept


def test_settings_is_selected_matches_select_codes():
    settings = Settings(select=("OFL120",), ignore=("OFL1203",))
    assert settings.is_selected("OFL1202") and not settings.is_selected("OFL1203")


def test_exclusion_globs(tmp_path):
    root = tmp_path
    assert is_excluded(root / ".venv" / "lib" / "x.py", DEFAULT_EXCLUDE, root)
    assert is_excluded(root / "pkg" / "build" / "x.py", DEFAULT_EXCLUDE, root)
    assert not is_excluded(root / "pkg" / "builder.py", DEFAULT_EXCLUDE, root)
    assert is_excluded(root / "src" / "model_pb2.py", ["*_pb2.py"], root)
    assert is_excluded(root / "src" / "gen" / "a.py", ["src/gen"], root)
    assert is_excluded(root / "src" / "gen" / "a.py", ["./src/gen/"], root)
    assert not is_excluded(root / "lib" / "src" / "gen" / "a.py", ["src/gen"], root)
    assert is_excluded(root / "legacy" / "old.py", ["legacy/*.py"], root)


def test_settings_exclusion_uses_the_config_directory(tmp_path):
    config = _write(tmp_path / "pkg" / "pyproject.toml", '[tool.offload-fixer]\nextend-exclude = ["gen/*.py"]\n')
    settings = load_settings(config)
    assert settings.is_excluded(tmp_path / "pkg" / "gen" / "a.py")
    assert settings.is_excluded(tmp_path / "pkg" / "__pycache__" / "a.py")
    assert not settings.is_excluded(tmp_path / "gen" / "a.py")


@pytest.mark.parametrize(
    ("content", "words"),
    [(b"\xff\xfe[tool]\n", "not UTF-8"), (bytes(range(256)), "not UTF-8"), (b"[tool\n", "not valid TOML")],
)
def test_a_configuration_that_is_not_toml_text_is_a_config_error(tmp_path, content, words):
    (tmp_path / "pyproject.toml").write_bytes(content)
    with pytest.raises(ConfigError, match=words):
        find_config(tmp_path)


def test_a_fifo_configuration_is_refused_without_blocking(tmp_path):
    import os

    os.mkfifo(tmp_path / "pyproject.toml")
    with pytest.raises(ConfigError, match="FIFO"):
        load_settings(tmp_path / "pyproject.toml")


def test_a_symlink_loop_does_not_break_resolution(tmp_path):
    import os

    os.symlink("b.py", tmp_path / "a.py")
    os.symlink("a.py", tmp_path / "b.py")
    assert SettingsResolver().settings_for(tmp_path / "a.py").target == "tpu"
    assert not is_excluded(tmp_path / "a.py", DEFAULT_EXCLUDE, tmp_path)


def test_per_file_ignores_match_like_exclude_and_negate_with_a_bang(tmp_path):
    config = _write(
        tmp_path / "pyproject.toml",
        '[tool.offload-fixer]\nignore = ["OFL1206"]\n'
        '[tool.offload-fixer.per-file-ignores]\n"tests/**" = ["OFL1201"]\n"!src/**" = ["OFL1200"]\n'
        '"conftest.py" = ["OFL12"]\n',
    )
    settings = load_settings(config)
    assert settings.ignored_in(tmp_path / "tests" / "test_a.py") == ("OFL1206", "OFL1201", "OFL1200")
    assert settings.ignored_in(tmp_path / "src" / "train.py") == ("OFL1206",)
    assert settings.ignored_in(tmp_path / "src" / "conftest.py") == ("OFL1206", "OFL12")
    located = Diagnostic("OFL1201", "warning", "tpu", "m", "e", span=Span(str(tmp_path / "tests" / "t.py"), 1))
    elsewhere = Diagnostic("OFL1201", "warning", "tpu", "m", "e", span=Span(str(tmp_path / "src" / "t.py"), 1))
    assert settings.reportable([located, elsewhere]) == [elsewhere]


def test_a_pyproject_nested_too_deep_or_not_a_regular_file_is_a_config_error(tmp_path):
    import os

    _write(tmp_path / "deep" / "pyproject.toml", "a = " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(ConfigError, match=r"pyproject\.toml: nested too deeply"):
        find_config(tmp_path / "deep")
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "pyproject.toml")
    with pytest.raises(ConfigError, match=r"pyproject\.toml: is a FIFO"):
        find_config(tmp_path / "fifo")
    (tmp_path / "zero").mkdir()
    (tmp_path / "zero" / "pyproject.toml").symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match="is a character device"):
        find_config(tmp_path / "zero")


def test_a_run_resolves_each_directory_once_with_the_same_answers(tmp_path, monkeypatch):
    """``SettingsResolver(snapshot=True)`` (one run of ``check``) resolves each directory's
    real path once; its settings and exclusions are those of a resolver that resolves every
    path, through symlinked directories and files and from a relative working directory."""
    _write(tmp_path / "pyproject.toml", '[tool.offload-fixer]\nextend-exclude = ["gen", "src/skip/*.py"]\n')
    _write(tmp_path / "src" / "pkg" / "pyproject.toml", '[tool.offload-fixer]\ntarget = "gpu"\n')
    for name in ("src/a.py", "src/skip/b.py", "src/gen/c.py", "src/pkg/d.py", "src/pkg/gen/e.py", "other/f.py"):
        _write(tmp_path / name, "x = 1\n")
    (tmp_path / "linked").symlink_to(tmp_path / "src" / "pkg", target_is_directory=True)
    (tmp_path / "src" / "alias.py").symlink_to(tmp_path / "src" / "pkg" / "d.py")
    (tmp_path / "src" / "skip" / "out.py").symlink_to(tmp_path / "other" / "f.py")
    monkeypatch.chdir(tmp_path / "src")
    paths = [
        "a.py",
        "skip/b.py",
        "gen/c.py",
        "pkg/d.py",
        "pkg/gen/e.py",
        "alias.py",
        "skip/out.py",
        "pkg",
        "gen",
        "../linked/d.py",
        "../linked/gen/e.py",
        "../other/f.py",
        "pkg/../skip/b.py",
        ".",
        "..",
        str(tmp_path / "linked" / "d.py"),
        str(tmp_path / "src" / "skip" / "b.py"),
    ]
    run, each = SettingsResolver(snapshot=True), SettingsResolver()
    for path in paths * 2:
        assert run.settings_for(path) == each.settings_for(path), path
        assert run.is_excluded(path) == each.settings_for(path).is_excluded(path), path
    excluded = [p for p in paths if run.is_excluded(p)]
    assert excluded == ["skip/b.py", "gen/c.py", "gen", "pkg/../skip/b.py", str(tmp_path / "src" / "skip" / "b.py")]
    assert run.settings_for("../linked/d.py").target == "gpu"  # pkg's own table, without the excludes


@pytest.mark.parametrize(
    "absolute, root",
    [
        ("/a/b/c.py", "/a"),
        ("/a/b/c.py", "/a/b/c.py"),
        ("/a/b/c.py", "/"),
        ("/a/b/c.py", "/x/y"),
        ("/ab/c.py", "/a"),
        ("/", "/"),
        ("/", "/a"),
        ("//net/a.py", "/"),
        ("/a/b.py", "//net"),
    ],
)
def test_relative_parts_are_pathlibs(absolute, root):
    from offload_fixer.source.real_paths import relative_parts

    try:
        expected = Path(absolute).relative_to(root).parts
    except ValueError:
        expected = Path(absolute).parts
    assert relative_parts(absolute, root) == expected


def test_globs_match_as_fnmatch_does_together_and_alone(tmp_path):
    """The patterns of one setting are matched as one expression: each name (and each path
    from the root) is excluded exactly where ``fnmatch.fnmatchcase`` matches some pattern."""
    import fnmatch

    names = ["build", "a.py", "b_pb2.py", "abc", "aXc", "test", "test.py", "x.y.z", "[a]", "Build", ".venv", "é.py"]
    globs = ["build", "*_pb2.py", "a?c", "[!t]*.py", "x.*", "[[]a]", ".venv", "é*", "*.PY", "gen/*.py", "./src/a?.py"]
    paths = ["gen/a.py", "gen/b/a.py", "src/ab.py", "src/abc.py", "a/gen/a.py"]
    for glob in globs:
        for relative in names + paths:
            name_glob = "/" not in glob.rstrip("/")
            expected = (
                any(fnmatch.fnmatchcase(part, glob) for part in relative.split("/"))
                if name_glob
                else any(
                    fnmatch.fnmatchcase("/".join(relative.split("/")[: i + 1]), glob.removeprefix("./"))
                    for i in range(relative.count("/") + 1)
                )
            )
            assert is_excluded(tmp_path / relative, [glob], tmp_path) == expected, (glob, relative)
    for relative in names + paths:
        alone = [is_excluded(tmp_path / relative, [glob], tmp_path) for glob in globs]
        assert is_excluded(tmp_path / relative, globs, tmp_path) == any(alone), relative
