"""The editor makes a fix the way the command line does (one code path: ``fixes.apply.fix_text``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offload_fixer.config import SettingsResolver
from offload_fixer.exit_codes import ExitCode
from offload_fixer.lsp import engine
from tests.cli_support import offload_fixer

FIXTURES = Path(__file__).resolve().parents[1] / "lsp_fixtures"


def test_fix_all_gives_the_bytes_check_fix_writes(tmp_path: Path) -> None:
    """A latin-1 file with a coding cookie and CRLF line ends: the language server's fix-all
    text, written in the file's encoding, is byte for byte what ``check --fix`` writes."""
    (tmp_path / "pyproject.toml").write_text('[tool.offload-fixer]\njax-version = "0.6.2"\nstrategy = "device"\n')
    source = (FIXTURES / "several_problems.py").read_text(encoding="utf-8")
    text = ("# -*- coding: latin-1 -*-\n# copies gard\xe9es \xe0 l'h\xf4te\n" + source).replace("\n", "\r\n")
    path = tmp_path / "several.py"
    path.write_bytes(text.encode("latin-1"))
    settings = SettingsResolver().settings_for(path)

    edited = engine.fix_all(text, str(path), settings)
    assert edited is not None and edited != text
    proc = offload_fixer("check", "--fix", "--exit-zero", "-q", str(path), cwd=tmp_path)
    assert proc.returncode == ExitCode.CLEAN, proc.stderr
    assert edited.encode("latin-1") == path.read_bytes()
    assert edited.count("\r\n") == len(edited.splitlines())  # every line keeps its CRLF


def test_a_quick_fix_is_chosen_by_the_plan_label_as_the_command_line_chooses(tmp_path: Path) -> None:
    """Fix-all applies the safe plans only, as ``--fix`` does; the quick fix for one finding
    applies its plan whatever its label (the user picked it), as ``--fix --unsafe-fixes``."""
    (tmp_path / "pyproject.toml").write_text('[tool.offload-fixer]\njax-version = "0.4.26"\nstrategy = "host"\n')
    text = "import jax\n\n\n@jax.jit\ndef step(x):\n    h = jax.device_put(x, jax.memory.Space.Host)\n    return x, h\n"
    path = tmp_path / "step.py"
    path.write_text(text)
    settings = SettingsResolver().settings_for(path)
    (finding,) = engine.analyse(text, str(path), settings).diagnostics
    assert engine.fix_all(text, str(path), settings) is None  # its only plan is labelled unsafe
    picked = engine.apply_fix(text, str(path), finding, "host", settings)
    assert picked is not None and "out_shardings" in picked
    offload_fixer("check", "--fix", "--unsafe-fixes", "-q", str(path), cwd=tmp_path)
    assert path.read_text() == picked


def test_the_editor_judges_syntax_by_the_target_version_as_check_does(tmp_path: Path) -> None:
    """A ``match`` statement (3.10) in a project whose ``target-version`` is py39: no analysis
    for the editor, the same syntax error for the command line; a change of the setting is
    a new analysis, not the cached one."""
    text = (
        "import jax\n\n\n@jax.jit\ndef kind(x):\n    match x:\n        case 1:\n"
        "            return jax.device_put(x, jax.memory.Space.Host)\n    return x\n"
    )
    path = tmp_path / "kinds.py"
    path.write_text(text)
    (tmp_path / "pyproject.toml").write_text('[tool.offload-fixer]\ntarget-version = "py39"\n')
    settings = SettingsResolver().settings_for(path)
    refused = engine.analyse(text, str(path), settings)
    assert refused.parse_error is not None and "Pattern matching" in refused.parse_error
    cli = offload_fixer("check", "kinds.py", cwd=tmp_path)
    assert cli.returncode == ExitCode.INPUT_ERROR and "Pattern matching" in cli.stdout
    newer = settings.with_overrides(target_version="py310")
    assert engine.analyse(text, str(path), newer).parse_error is None


# ---------------------------------------------------------------------------------------
# One resolution of imports: check (a directory, the file itself: pre-commit) and the server
NESTED_MAIN = """\
import functools

import jax

from mypkg.shardings import DEVICE, STASH


@functools.partial(jax.jit, out_shardings=DEVICE)
def step(x):
    return jax.device_put(x, STASH) * 2
"""
NESTED_SHARDINGS = """\
import jax
from jax.sharding import NamedSharding, PartitionSpec as P

MESH = jax.make_mesh((1,), ("x",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
STASH = NamedSharding(MESH, P(), memory_kind="pinned_host")
"""
NESTED_LAYOUTS = {
    "marker at the root": ({"pyproject.toml": "[project]\nname = 'p'\n"}, True),
    "no marker": ({}, True),
    "configured root": ({"pyproject.toml": "[tool.offload-fixer]\ntarget = 'tpu'\n"}, True),
    # sub/ is a project of its own (its pyproject.toml): the root's package is not its import
    "nested project": ({".git/HEAD": "", "sub/pyproject.toml": "[tool.offload-fixer]\n"}, False),
}


@pytest.mark.parametrize(("extra", "resolves"), NESTED_LAYOUTS.values(), ids=NESTED_LAYOUTS)
def test_check_and_the_language_server_resolve_a_root_package_from_a_nested_file_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: dict, resolves: bool
) -> None:
    from offload_fixer.static import check_paths

    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "shardings.py").write_text(NESTED_SHARDINGS)
    (tmp_path / "sub").mkdir()
    main = tmp_path / "sub" / "main.py"
    main.write_text(NESTED_MAIN)
    for name, text in extra.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)

    def codes(results) -> list[str]:
        return sorted(d.code for r in results if r.path.endswith("main.py") for d in r.diagnostics)

    by_directory = codes(check_paths(["."]))
    by_file = codes(check_paths(["sub/main.py"]))  # what pre-commit passes
    from_elsewhere = codes(check_paths([str(tmp_path)]))
    settings = SettingsResolver().settings_for(str(main))
    served = sorted(d.code for d in engine.analyse(main.read_text(), str(main), settings, plan=False).diagnostics)
    assert by_directory == by_file == served
    assert bool(served) == resolves
    if extra:  # a marker decides the root wherever check runs from
        monkeypatch.chdir(tmp_path.parent)
        assert codes(check_paths([str(main)])) == from_elsewhere == served
