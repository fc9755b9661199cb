"""``offload-fixer run`` leaves its findings for the editor, which shows them with their fixes.

The run is the installed command, in a project directory; the editor is pytest-lsp's client
talking to the language server over stdio (the helpers of ``test_lsp.py``). The fixture
program moves its host weights through ``jax.checkpoint``, where the static check does not
look, so what the editor shows there comes from the run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from offload_fixer import jax_compat, last_run
from offload_fixer.lsp.dynamic import line_moves
from offload_fixer.static import check_source
from tests.test_lsp import Editor, copy_fixture, vscode  # noqa: F401 - the fixture

COMMAND = str(Path(sys.executable).parent / "offload-fixer")
needs_host_memory = pytest.mark.skipif(
    not jax_compat.host_memory_on_this_backend(), reason="the program needs pinned_host memory (JAX >= 0.5 on CPU)"
)


def run(program: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [COMMAND, "run", program.name], cwd=program.parent, capture_output=True, text=True, timeout=300
    )


@needs_host_memory
@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_run_appears_in_the_editor_with_its_fix_and_goes_when_its_line_is_edited(
    vscode: LanguageClient, tmp_path
):
    program = copy_fixture("checkpointed_stream.py", tmp_path)
    assert check_source(program.read_bytes(), str(program)).diagnostics == ()  # the static check is silent
    done = run(program)
    assert done.returncode == 1, done.stderr
    report = tmp_path / ".offload-fixer" / "last-run.json"
    assert list(json.loads(report.read_text())["sources"]) == [str(program)]

    editor = Editor(vscode, program)
    editor.open()
    (diagnostic,) = [d for d in await editor.diagnostics() if d.code == "OFL1200"]
    declared = next(i for i, line in enumerate(editor.text.splitlines()) if "in_shardings=(ON_HOST,)" in line)
    assert diagnostic.range.start.line == declared
    assert diagnostic.message.endswith("[found by `offload-fixer run`]")

    # An edit elsewhere moves the finding with its line.
    editor.change("# training utilities\n" + editor.text)
    (moved,) = [d for d in await editor.diagnostics() if d.code == "OFL1200"]
    assert moved.range.start.line == declared + 1

    # Its quick fix (the planner's, with the run's output tree: move the streamed weights to
    # device where the function starts, keep the one array it returns host memory) applies.
    actions = [a for a in await editor.actions([moved]) if a.kind == types.CodeActionKind.QuickFix]
    (preferred,) = [a for a in actions if a.is_preferred]
    assert preferred.data["requested"] == "auto"
    fixed = editor.edited((await editor.resolved(preferred)).edit)
    assert "    weights = jax.device_put(weights, jax.memory.Space.Device)\n" in fixed
    assert "in_shardings=(ON_HOST,), out_shardings=ON_HOST)" in fixed

    # Editing the line it names makes it go: the run no longer describes this text.
    editor.change(fixed)
    assert [d for d in await editor.diagnostics() if d.code == "OFL1200"] == []


def _has_tpu_compiler() -> bool:
    from offload_fixer.xla import compilers

    return compilers.installed("tpu") is not None


@needs_host_memory
@pytest.mark.skipif(not _has_tpu_compiler(), reason="libtpu is not installed: a run measures no fix")
@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_fix_the_run_compiled_is_titled_with_its_figures_until_the_text_changes(
    vscode: LanguageClient, tmp_path
):
    program = copy_fixture("checkpointed_stream.py", tmp_path)
    done = subprocess.run(
        [COMMAND, "run", "--diff", program.name], cwd=program.parent, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done.stderr
    line = next(s for s in done.stderr.splitlines() if "the fix compiles (libtpu" in s)
    summary = line.rsplit("): ", 1)[1]
    (recorded,) = json.loads((tmp_path / ".offload-fixer" / "last-run.json").read_text())["fixes"]

    editor = Editor(vscode, program)
    editor.open()
    (diagnostic,) = [d for d in await editor.planned_diagnostics() if d.code == "OFL1200"]
    actions = [a for a in await editor.actions([diagnostic]) if a.kind == types.CodeActionKind.QuickFix]
    (preferred,) = [a for a in actions if a.is_preferred]
    assert preferred.title == f"offload-fixer: {recorded['title']} ({summary})"
    (fix,) = [f for f in diagnostic.data["fixes"] if f["preferred"]]
    assert fix["measured"] == recorded["measured"] and fix["measured"][0]["before"]["host_output"] > 0

    # Any edit: the figures were the run's text's, so the same fix is offered without them.
    editor.change("# training utilities\n" + editor.text)
    (moved,) = [d for d in await editor.planned_diagnostics() if d.code == "OFL1200"]
    assert all("measured" not in f and "HBM" not in f["title"] for f in moved.data["fixes"])


@needs_host_memory
@pytest.mark.skipif(not _has_tpu_compiler(), reason="libtpu is not installed: --confirm needs it")
@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_finding_the_compiler_confirmed_shows_its_words_in_their_coded_form(vscode: LanguageClient, tmp_path):
    """``run --confirm``: the editor shows what the compiler said as the TPU says it, its error
    code and name, and the link to the error's page."""
    program = copy_fixture("checkpointed_stream.py", tmp_path)
    done = subprocess.run(
        [COMMAND, "run", "--confirm", program.name], cwd=program.parent, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done.stderr

    editor = Editor(vscode, program)
    editor.open()
    (diagnostic,) = [d for d in await editor.diagnostics() if d.code == "OFL1200"]
    first, said = diagnostic.message.split("\n")
    assert first.endswith("[found by `offload-fixer run`]")
    assert said.startswith("confirmed by libtpu ")
    assert (
        ": INVALID_ARGUMENT: E1200: CompileTimeHostOffloadOutputLocationMismatch: Tensor which is moved to host" in said
    )
    assert said.endswith("See https://openxla.org/xla/errors/error_1200 for more details.")


def test_every_run_writes_the_default_report_in_the_project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    nested = tmp_path / "src" / "demo"
    nested.mkdir(parents=True)
    program = nested / "train.py"
    program.write_text("print('no jit here')\n")
    done = run(program)
    assert done.returncode == 0, done.stderr
    report = tmp_path / last_run.DIRECTORY / last_run.FILE_NAME
    assert json.loads(report.read_text())["reports"] == []
    assert (tmp_path / last_run.DIRECTORY / ".gitignore").read_text().splitlines()[-1] == "*"
    assert last_run.find_for(program) == report
    assert last_run.report_path_for(program) == report


def test_a_run_folder_that_leads_out_of_the_project_is_neither_written_nor_read(tmp_path):
    project, outside = tmp_path / "proj", tmp_path / "outside"
    (project / "src").mkdir(parents=True)
    outside.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (outside / last_run.FILE_NAME).write_text('{"version": 1}')  # planted where the link leads
    (project / last_run.DIRECTORY).symlink_to(outside)
    program = project / "src" / "train.py"
    program.write_text("print('no jit here')\n")
    before = sorted(p.name for p in outside.iterdir())
    done = run(program)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("leads out of the project") == 1
    assert sorted(p.name for p in outside.iterdir()) == before
    assert last_run.find_for(program) is None


def test_lines_are_found_again_by_their_neighbours():
    recorded = {2: ("a = 1", "b = 2", "c = 3"), 5: ("", "return x", ""), 7: ("x", "edited", "y")}
    lines = ["# new", "a = 1", "b = 2", "c = 3", "", "", "return x", ""]
    assert line_moves(recorded, lines) == {2: 3, 5: 7}
