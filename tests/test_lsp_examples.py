"""The README's Quick start programs in the editor: both broken ones are underlined as you open them."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_lsp import LanguageClient

from tests.test_lsp import Editor, quick_fixes, vscode  # noqa: F401 - the fixture

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize(
    "name, needle, outputs",
    [
        ("optimizer_offload_broken.py", "in_shardings=(PARAM_SHARDINGS", {"[0]['b']", "[0]['w']"}),
        ("param_streaming_broken.py", "in_shardings=(ON_HOST, ON_DEVICE)", {"[1]"}),
    ],
)
@pytest.mark.asyncio
async def test_both_broken_quick_start_examples_are_shown(vscode: LanguageClient, tmp_path, name, needle, outputs):
    program = tmp_path / name
    program.write_text((EXAMPLES / name).read_text(encoding="utf-8"), encoding="utf-8")
    editor = Editor(vscode, program)
    editor.open()
    found = [d for d in await editor.diagnostics() if d.code == "OFL1200"]
    line = next(i for i, text in enumerate(editor.text.splitlines()) if needle in text)
    assert {d.range.start.line for d in found} == {line}
    assert {d.data["diagnostic"]["output_path"] for d in found} == outputs
    # the streamed state is computed on: its preferred fix moves it to device where the step reads it
    fix = quick_fixes(await editor.actions(found[:1]))["device"]
    assert fix.is_preferred and " to device " in fix.title
