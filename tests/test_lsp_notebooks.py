"""Notebook documents over stdio, with the message flow of VS Code's language client
(vscode-languageclient 9): ``notebookDocument/didOpen`` with the Python cells as their own
text documents (``vscode-notebook-cell:`` URIs, markdown cells not synced), incremental
``didChange`` content changes, a structure change that adds a cell, ``didSave`` and
``didClose``. Diagnostics arrive per cell; quick fixes edit the cell they belong in."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec
from pytest_lsp import LanguageClient, client_capabilities

from .test_lsp import CONFIG, quick_fixes, wait_for

TYPED = "0.10.2"
CELLS = [
    "import jax\nfrom jax.sharding import SingleDeviceSharding\n%matplotlib inline",
    'host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")',
    "def scale(x):\n    return x * 2",
    "scale_on_host = jax.jit(scale, in_shardings=host)\n!echo compiled",
]
NOTEBOOK_CAPABILITIES = types.NotebookDocumentClientCapabilities(
    synchronization=types.NotebookDocumentSyncClientCapabilities(
        dynamic_registration=True, execution_summary_support=True
    )
)


class NotebookEditor:
    """What VS Code keeps of an open notebook and sends to the server."""

    def __init__(self, client: LanguageClient, path: Path, cells: list[str]) -> None:
        self.client = client
        self.uri = path.as_uri()
        self.version = 0
        self.texts: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.order: list[str] = []
        for text in cells:
            self._new_cell(text)
        self._handles = len(cells)

    def _new_cell(self, text: str) -> str:
        # VS Code's cell URIs: the notebook's path, a fragment naming the cell (percent-encoded)
        uri = f"vscode-notebook-cell:{self.uri[len('file://') :]}#W{len(self.texts)}sZmlsZQ%3D%3D"
        self.texts[uri], self.versions[uri] = text, 1
        return uri

    def _item(self, uri: str) -> types.TextDocumentItem:
        return types.TextDocumentItem(uri=uri, language_id="python", version=self.versions[uri], text=self.texts[uri])

    def _cells(self, uris) -> list[types.NotebookCell]:
        return [types.NotebookCell(kind=types.NotebookCellKind.Code, document=uri) for uri in uris]

    def open(self) -> None:
        self.order = list(self.texts)
        self.client.notebook_document_did_open(
            types.DidOpenNotebookDocumentParams(
                notebook_document=types.NotebookDocument(
                    uri=self.uri,
                    notebook_type="jupyter-notebook",
                    version=self.version,
                    cells=self._cells(self.order),
                    metadata={"kernelspec": {"name": "python3"}},
                ),
                cell_text_documents=[self._item(uri) for uri in self.order],
            )
        )

    def type_in(self, index: int, old: str, new: str) -> None:
        """An incremental edit of one cell, as the editor sends a keystroke burst."""
        uri = self.order[index]
        text = self.texts[uri]
        offset = text.index(old)
        line = text.count("\n", 0, offset)
        col = offset - (text.rfind("\n", 0, offset) + 1)
        start = types.Position(line, col)
        end = types.Position(line, col + len(old))
        self.texts[uri] = text.replace(old, new, 1)
        self.versions[uri] += 1
        self.version += 1
        self.client.notebook_document_did_change(
            types.DidChangeNotebookDocumentParams(
                notebook_document=types.VersionedNotebookDocumentIdentifier(version=self.version, uri=self.uri),
                change=types.NotebookDocumentChangeEvent(
                    cells=types.NotebookDocumentCellChanges(
                        text_content=[
                            types.NotebookDocumentCellContentChanges(
                                document=types.VersionedTextDocumentIdentifier(version=self.versions[uri], uri=uri),
                                changes=[
                                    types.TextDocumentContentChangePartial(range=types.Range(start, end), text=new)
                                ],
                            )
                        ]
                    )
                ),
            )
        )

    def add_cell(self, index: int, text: str) -> str:
        uri = self._new_cell(text)
        self.order.insert(index, uri)
        self.version += 1
        self.client.notebook_document_did_change(
            types.DidChangeNotebookDocumentParams(
                notebook_document=types.VersionedNotebookDocumentIdentifier(version=self.version, uri=self.uri),
                change=types.NotebookDocumentChangeEvent(
                    cells=types.NotebookDocumentCellChanges(
                        structure=types.NotebookDocumentCellChangeStructure(
                            array=types.NotebookCellArrayChange(start=index, delete_count=0, cells=self._cells([uri])),
                            did_open=[self._item(uri)],
                        )
                    )
                ),
            )
        )
        return uri

    def save(self) -> None:
        self.client.notebook_document_did_save(
            types.DidSaveNotebookDocumentParams(notebook_document=types.NotebookDocumentIdentifier(self.uri))
        )

    def close(self) -> None:
        self.client.notebook_document_did_close(
            types.DidCloseNotebookDocumentParams(
                notebook_document=types.NotebookDocumentIdentifier(self.uri),
                cell_text_documents=[types.TextDocumentIdentifier(uri) for uri in self.order],
            )
        )

    async def diagnostics(self, index: int) -> list[types.Diagnostic]:
        """What was published for a cell at its current version."""
        uri = self.order[index]
        version = self.versions[uri]
        found = await wait_for(
            lambda: next((p for p in reversed(self.client.published) if p.uri == uri and p.version == version), None)
        )
        return list(found.diagnostics)

    async def actions(self, index: int, diagnostics: list[types.Diagnostic]) -> list[types.CodeAction]:
        uri = self.order[index]
        return (
            await self.client.text_document_code_action_async(
                types.CodeActionParams(
                    types.TextDocumentIdentifier(uri),
                    diagnostics[0].range,
                    types.CodeActionContext(diagnostics=diagnostics),
                )
            )
            or []
        )

    def apply(self, edit: types.WorkspaceEdit) -> dict[str, str]:
        """Each edited cell's new text, applied with pygls' document model as a client does."""
        changed = {}
        for change in edit.document_changes:
            uri = change.text_document.uri
            assert change.text_document.version == self.versions[uri]
            document = TextDocument(uri, self.texts[uri], position_codec=PositionCodec("utf-16"))
            for text_edit in sorted(
                change.edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True
            ):
                document.apply_change(
                    types.TextDocumentContentChangePartial(range=text_edit.range, text=text_edit.new_text)
                )
            changed[self.order.index(uri)] = document.source
        return changed


@pytest_lsp.fixture(config=CONFIG)
async def vscode(lsp_client: LanguageClient, tmp_path: Path):
    """VS Code's capabilities with notebook sync, in a project that picks JAX 0.10.2's rules."""
    (tmp_path / "pyproject.toml").write_text(f'[tool.offload-fixer]\njax-version = "{TYPED}"\n', encoding="utf-8")
    capabilities = client_capabilities("visual-studio-code")
    capabilities.notebook_document = NOTEBOOK_CAPABILITIES
    result = await lsp_client.initialize_session(
        types.InitializeParams(capabilities=capabilities, root_uri=tmp_path.as_uri())
    )
    lsp_client.server_capabilities = result.capabilities
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_the_server_offers_notebook_sync(vscode: LanguageClient):
    sync = vscode.server_capabilities.notebook_document_sync
    assert sync.save is True
    assert [c.language for c in sync.notebook_selector[0].cells] == ["python"]


@pytest.mark.asyncio
async def test_findings_are_published_on_the_cell_they_point_into(vscode: LanguageClient, tmp_path):
    editor = NotebookEditor(vscode, tmp_path / "train.ipynb", CELLS)
    editor.open()
    # the error 1200 of the jit site, and the host compute (OFL1201) it meets in `scale`'s cell
    (diagnostic,) = [d for d in await editor.diagnostics(3) if d.code == "OFL1200"]
    assert (diagnostic.range.start.line, diagnostic.range.start.character) == (0, 31)  # in_shardings=host
    for index in (0, 1):
        assert await editor.diagnostics(index) == []
    # the multiply on host, in `scale`'s cell, under every installed JAX: the project picks 0.10.2's rules
    assert [d.code for d in await editor.diagnostics(2)] == ["OFL1201"]
    returned = [r for r in diagnostic.related_information if "returned" in r.message]
    assert returned[0].location.uri == editor.order[2]
    assert returned[0].location.range.start == types.Position(1, 11)


@pytest.mark.asyncio
async def test_a_quick_fix_edits_the_cell_it_belongs_in(vscode: LanguageClient, tmp_path):
    # passed through (not computed on): the state that enters as host is declared host, at the jit
    cells = [*CELLS[:2], "def scale(x):\n    return x", CELLS[3]]
    editor = NotebookEditor(vscode, tmp_path / "train.ipynb", cells)
    editor.open()
    diagnostics = await editor.diagnostics(3)
    fixes = quick_fixes(await editor.actions(3, diagnostics))
    action = await vscode.code_action_resolve_async(fixes["host"])
    assert editor.apply(action.edit) == {3: cells[3].replace("=host)", "=host, out_shardings=host)")}

    suppress = await vscode.code_action_resolve_async(fixes["suppress"])
    assert editor.apply(suppress.edit) == {3: "# offload-fixer: ignore[OFL1200]\n" + cells[3]}


@pytest.mark.asyncio
async def test_a_fix_for_a_jit_cell_can_edit_the_def_in_another_cell(vscode: LanguageClient, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.offload-fixer]\njax-version = "0.6.2"\n', encoding="utf-8")
    editor = NotebookEditor(vscode, tmp_path / "train.ipynb", CELLS)
    editor.open()
    diagnostics = await editor.diagnostics(3)
    action = await vscode.code_action_resolve_async(quick_fixes(await editor.actions(3, diagnostics))["device"])
    (changed,) = editor.apply(action.edit).items()
    assert changed[0] == 2 and changed[1].startswith("def scale(x):\n    x = jax.device_put(x, ")


@pytest.mark.asyncio
async def test_typing_adding_a_cell_saving_and_closing(vscode: LanguageClient, tmp_path):
    editor = NotebookEditor(vscode, tmp_path / "train.ipynb", CELLS)
    editor.open()
    assert len(await editor.diagnostics(3)) == 1

    editor.type_in(3, "in_shardings=host)", "in_shardings=host, out_shardings=host)")
    assert await editor.diagnostics(3) == []

    new = editor.add_cell(4, "double_on_host = jax.jit(scale, in_shardings=host)")
    (diagnostic,) = await editor.diagnostics(4)
    assert diagnostic.code == "OFL1200" and editor.order[4] == new

    published = len(vscode.published)
    editor.save()
    await wait_for(lambda: True if len(vscode.published) > published else None)

    editor.close()
    await wait_for(
        lambda: (
            True if any(p.uri == new and p.diagnostics == [] and p.version is None for p in vscode.published) else None
        )
    )
