"""The language server end to end: pytest-lsp starts ``python -m offload_fixer.lsp`` and talks
to it over stdio like an editor would. Edits the server sends are applied with pygls'
own document model, not with the server's code, so a wrong position shows up as wrong text.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from offload_fixer.lsp.text_edits import LineIndex, minimal_edits, split_lines

FIXTURES = Path(__file__).parent / "lsp_fixtures"
REPO = Path(__file__).resolve().parents[1]
SERVER = [sys.executable, "-m", "offload_fixer.lsp"]
TYPED = "0.10.2"
"""The JAX whose rules most tests use, whatever is installed (nothing is executed)."""
WAIT_S = 120
"""Only a guard against a hung server; nothing asserts how fast anything is."""


def recording_client() -> LanguageClient:
    """pytest-lsp's client, also keeping every publishDiagnostics in order (``published``)
    and the capabilities the server registers (``registrations``), as editors accept them."""
    client = LanguageClient(converter_factory=default_converter)
    client.published = []
    client.registrations = []

    def publish(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        client.diagnostics[params.uri] = params.diagnostics
        client.published.append(params)

    def register(client: LanguageClient, params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)

    features = {
        **DEFAULT_CLIENT_FEATURES,
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish,
        types.CLIENT_REGISTER_CAPABILITY: register,
    }
    register_lsp_features(client, features)
    return client


CONFIG = ClientServerConfig(
    server_command=SERVER,
    client_factory=recording_client,
    server_env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))},
)


async def start(client: LanguageClient, capabilities: types.ClientCapabilities, root: Path, **options) -> None:
    await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities, root_uri=root.as_uri(), initialization_options=options or None
        )
    )


@pytest_lsp.fixture(config=CONFIG)
async def vscode(lsp_client: LanguageClient, tmp_path: Path):
    """A VS Code-like client (resolves code actions lazily, takes versioned documentChanges)
    in a project whose pyproject.toml, read by the server and the CLI alike, picks JAX 0.10.2."""
    (tmp_path / "pyproject.toml").write_text(f'[tool.offload-fixer]\njax-version = "{TYPED}"\n', encoding="utf-8")
    await start(lsp_client, client_capabilities("visual-studio-code"), tmp_path)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    """A client each test initialises itself (capabilities, options)."""
    yield
    await lsp_client.shutdown_session()


# ---------------------------------------------------------------------------------------
# Helpers that act like an editor
class Editor:
    def __init__(self, client: LanguageClient, path: Path, encoding: str = "utf-16") -> None:
        self.client = client
        self.path = path
        self.uri = path.as_uri()
        self.text = path.read_text(encoding="utf-8")
        self.version = 1
        self.encoding = encoding

    def open(self) -> None:
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(uri=self.uri, language_id="python", version=self.version, text=self.text)
            )
        )

    def change(self, text: str) -> None:
        self.version += 1
        self.text = text
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=self.version, uri=self.uri),
                [types.TextDocumentContentChangeWholeDocument(text)],
            )
        )

    async def diagnostics(self, version: int | None = None) -> list[types.Diagnostic]:
        """The diagnostics published for ``version`` (default: the current one)."""
        version = self.version if version is None else version
        published = await wait_for(lambda: self.published(version))
        return list(published.diagnostics)

    async def planned_diagnostics(self, version: int | None = None) -> list[types.Diagnostic]:
        """The diagnostics published for ``version`` with their quick fixes planned: the server
        publishes the findings first and their fix choices after."""
        version = self.version if version is None else version

        def planned() -> types.PublishDiagnosticsParams | None:
            for params in reversed(self.client.published):
                if params.uri == self.uri and params.version == version:
                    return params if all(d.data["fixes"] is not None for d in params.diagnostics) else None
            return None

        return list((await wait_for(planned)).diagnostics)

    def published(self, version: int) -> types.PublishDiagnosticsParams | None:
        for params in self.client.published:
            if params.uri == self.uri and params.version == version:
                return params
        return None

    async def actions(
        self, diagnostics: list[types.Diagnostic], only: list[str] | None = None
    ) -> list[types.CodeAction]:
        whole = types.Range(types.Position(0, 0), types.Position(len(split_lines(self.text)), 0))
        target = diagnostics[0].range if diagnostics else whole
        return (
            await self.client.text_document_code_action_async(
                types.CodeActionParams(
                    types.TextDocumentIdentifier(self.uri),
                    target,
                    types.CodeActionContext(diagnostics=diagnostics, only=only),
                )
            )
            or []
        )

    async def resolved(self, action: types.CodeAction) -> types.CodeAction:
        return action if action.edit is not None else await self.client.code_action_resolve_async(action)

    def edited(self, edit: types.WorkspaceEdit) -> str:
        """The text after applying ``edit`` the way a client does (pygls' document model)."""
        if edit.document_changes is not None:
            (change,) = edit.document_changes
            assert change.text_document.uri == self.uri
            assert change.text_document.version == self.version
            edits = change.edits
        else:
            edits = edit.changes[self.uri]
        document = TextDocument(self.uri, self.text, position_codec=PositionCodec(self.encoding))
        for text_edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
            document.apply_change(
                types.TextDocumentContentChangePartial(range=text_edit.range, text=text_edit.new_text)
            )
        return document.source


async def wait_for(probe):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while (found := probe()) is None:
        if loop.time() > deadline:
            raise AssertionError("the server did not answer")
        await asyncio.sleep(0.02)
    return found


def copy_fixture(name: str, directory: Path) -> Path:
    target = directory / name
    shutil.copyfile(FIXTURES / name, target)
    return target


def quick_fixes(actions: list[types.CodeAction]) -> dict[str, types.CodeAction]:
    """The fixes by strategy (``device``/``host``), and ``suppress``."""
    found = {}
    for action in actions:
        if action.kind == types.CodeActionKind.QuickFix:
            found["suppress" if "suppress" in action.data else action.data["strategy"]] = action
    return found


def preferred_fix(actions: list[types.CodeAction]) -> types.CodeAction:
    """The quick fix the configured strategy picks (the one an editor offers first)."""
    (preferred,) = [a for a in actions if a.kind == types.CodeActionKind.QuickFix and a.is_preferred]
    return preferred


def the_error(diagnostics: list[types.Diagnostic]) -> types.Diagnostic:
    """The one OFL1200 of a fixture whose host value is also computed on (its OFL1201 beside it)."""
    (error,) = [d for d in diagnostics if d.code == "OFL1200"]
    return error


def expected_range(text: str, path: Path, encoding: str = "utf-16") -> types.Range:
    """Where the static check itself locates the file's OFL1200, in LSP terms."""
    from offload_fixer.report import primary_span
    from offload_fixer.static import check_source

    found = check_source(text, str(path), jax_version=TYPED).diagnostics
    span = primary_span(next(d for d in found if d.code == "OFL1200"))
    lines = split_lines(text)

    def position(line: int, col: int) -> types.Position:
        prefix = lines[line - 1][: col - 1]
        size = {"utf-8": len(prefix.encode("utf-8")), "utf-16": len(prefix.encode("utf-16-le")) // 2}
        return types.Position(line - 1, size.get(encoding, len(prefix)))

    return types.Range(position(span.line, span.col), position(span.end_line, span.end_col))


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(split_lines(text)) if needle in line)


# ---------------------------------------------------------------------------------------
# Diagnostics
@pytest.mark.asyncio
async def test_host_in_shardings_is_reported_with_related_locations(vscode: LanguageClient, tmp_path):
    editor = Editor(vscode, copy_fixture("in_shardings_host.py", tmp_path))
    editor.open()
    diagnostics = await editor.diagnostics()
    assert sorted(d.code for d in diagnostics) == ["OFL1200", "OFL1201"]  # the multiply runs on host too
    diagnostic = the_error(diagnostics)

    assert diagnostic.source == "offload-fixer"
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert diagnostic.range == expected_range(editor.text, editor.path)
    related = {(r.location.range.start.line, r.message) for r in diagnostic.related_information}
    returned = line_of(editor.text, "return x * 2")
    assert any(where == returned and "returned" in message for where, message in related)
    assert line_of(editor.text, "in_shardings=host") in {where for where, _ in related} | {diagnostic.range.start.line}
    assert all(r.location.uri == editor.uri for r in diagnostic.related_information)
    assert diagnostic.data["code"] == "OFL1200"
    assert diagnostic.data["version"] == editor.version
    assert {"title", "applicability", "fixes"} <= set(diagnostic.data)


@pytest.mark.asyncio
async def test_findings_are_published_before_their_quick_fixes(vscode: LanguageClient, tmp_path):
    """Planning fixes reads the whole text, so the findings of a version are published first
    and again with their fix choices; a code action asked for in between plans them then."""
    editor = Editor(vscode, copy_fixture("in_shardings_host.py", tmp_path))
    editor.open()
    first = the_error(await editor.diagnostics())
    assert first.data["fixes"] is None and first.data["applicability"] is None
    fixes = [a for a in await editor.actions([first]) if a.kind == types.CodeActionKind.QuickFix]
    requested = {a.data.get("requested") for a in fixes}
    # None: suppress. auto moves the argument and keeps the state it becomes host memory in
    # out_shardings; --strategy device only moves it, a different edit, so it is offered too.
    # The project picks JAX 0.10.2's rules, so the installed JAX does not change this (the same
    # under 0.4.35, 0.6.2, 0.10.2 and 0.12.0.1).
    assert requested == {"auto", "device", None}
    planned = the_error(await editor.planned_diagnostics())
    assert (planned.range, planned.message) == (first.range, first.message)
    assert planned.data["applicability"] == "safe" and len(planned.data["fixes"]) == len(requested - {None})


@pytest.mark.asyncio
async def test_target_gpu_reports_an_error_like_tpu(client: LanguageClient, tmp_path):
    await start(client, client_capabilities("neovim"), tmp_path, target="gpu", jaxVersion=TYPED)
    editor = Editor(client, copy_fixture("in_shardings_host.py", tmp_path))
    editor.open()
    assert the_error(await editor.diagnostics()).severity == types.DiagnosticSeverity.Error


@pytest.mark.asyncio
async def test_a_file_that_does_not_parse_clears_diagnostics_and_says_nothing_else(vscode: LanguageClient, tmp_path):
    editor = Editor(vscode, copy_fixture("in_shardings_host.py", tmp_path))
    editor.open()
    assert await editor.diagnostics()

    editor.change(editor.text.replace("def scale(x):", "def scale(x:"))
    assert await editor.diagnostics() == []
    assert vscode.messages == []
    assert not [m for m in vscode.log_messages if m.type == types.MessageType.Error]


@pytest.mark.asyncio
async def test_saving_publishes_again_and_nothing_is_executed(vscode: LanguageClient, tmp_path):
    executed = tmp_path / "executed"
    source = (FIXTURES / "in_shardings_host.py").read_text(encoding="utf-8")
    path = tmp_path / "side_effect.py"
    path.write_text(f"open({str(executed)!r}, 'w').close()\n" + source, encoding="utf-8")
    editor = Editor(vscode, path)
    editor.open()
    assert await editor.diagnostics()

    seen = len(vscode.published)
    vscode.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(editor.uri)))
    republished = await wait_for(lambda: vscode.published[-1] if len(vscode.published) > seen else None)
    assert republished.version == editor.version and republished.diagnostics
    (fix_all,) = await editor.actions([], only=[types.CodeActionKind.SourceFixAll])
    assert (await editor.resolved(fix_all)).edit is not None
    assert not executed.exists()


# ---------------------------------------------------------------------------------------
# Quick fixes
@pytest.mark.asyncio
async def test_one_action_per_fix_however_many_findings_it_fixes(vscode: LanguageClient, tmp_path):
    """The OFL1200 and the OFL1201 of one streamed argument share their fixes: asked about both
    (a line, or a selection, holding both), each fix is offered once, naming both findings."""
    editor = Editor(vscode, copy_fixture("in_shardings_host.py", tmp_path))
    editor.open()
    diagnostics = await editor.planned_diagnostics()
    assert sorted(d.code for d in diagnostics) == ["OFL1200", "OFL1201"]

    actions = [a for a in await editor.actions(diagnostics) if a.kind == types.CodeActionKind.QuickFix]
    fixes = [a for a in actions if "suppress" not in a.data]
    assert len(fixes) == len({a.title for a in fixes}) == 2, [a.title for a in fixes]
    assert all(sorted(d.code for d in a.diagnostics) == ["OFL1200", "OFL1201"] for a in fixes)
    assert sorted(a.title for a in actions if "suppress" in a.data) == [
        "offload-fixer: Suppress OFL1200 for this statement",
        "offload-fixer: Suppress OFL1201 for this statement",
    ]


RUFF = shutil.which("ruff", path=os.path.dirname(sys.executable))
RUFF_SERVER = ClientServerConfig(server_command=[RUFF or "ruff", "server"], client_factory=recording_client)
RUFF_FILE = "import os\n\n\ndef f():\n    unused = 1\n    # print(unused)\n    return 2\n"
"""A safe fix (F401), an unsafe one (F841) and a display-only one (ERA001) for ruff server."""
RUFF_APPLICABILITY = {"F401": "safe", "F841": "unsafe", "ERA001": "display-only"}


@pytest_lsp.fixture(config=RUFF_SERVER)
async def ruff_server(lsp_client: LanguageClient):
    """The pinned ruff's language server (``constraints.txt``), whose quick fixes ours copy."""
    yield
    await lsp_client.shutdown_session()


def offered(action: types.CodeAction) -> tuple[bool, bool, bool]:
    """What a quick fix shows of its applicability: (preferred, titled as a suggestion, disabled)."""
    return bool(action.is_preferred), action.title.endswith(" (suggestion)"), action.disabled is not None


@pytest.mark.skipif(RUFF is None, reason="ruff (the lint extra, pinned in constraints.txt) is not installed")
@pytest.mark.asyncio
async def test_the_preferred_and_display_only_fixes_are_marked_as_ruff_server_marks_them(
    ruff_server: LanguageClient, client: LanguageClient, tmp_path
):
    """ruff server prefers a safe fix only (``isPreferred``), offers an unsafe one unpreferred,
    and titles a display-only one ``(suggestion)``. offload-fixer does the same, on a safe fix
    (``scale``), an unsafe one (``add``: it cannot tell the state from a new value) and one no
    edit can make (``--strategy host`` for a function jitted in another module), which, having
    no edit, is also disabled with the reason."""
    theirs, ours = tmp_path / "ruff", tmp_path / "ours"
    theirs.mkdir(), ours.mkdir()
    (theirs / "ruff.toml").write_text('[lint]\nselect = ["F401", "F841", "ERA001"]\n', encoding="utf-8")
    (theirs / "lint.py").write_text(RUFF_FILE, encoding="utf-8")
    await ruff_server.initialize_session(  # ruff server reads ruff.toml from its workspace folders
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=theirs.as_uri(),
            workspace_folders=[types.WorkspaceFolder(theirs.as_uri(), "ruff")],
        )
    )
    editor = Editor(ruff_server, theirs / "lint.py")
    editor.open()
    diagnostics = await editor.diagnostics()
    ruff_offers = {}
    for action in await editor.actions(diagnostics):
        codes = [d.code for d in action.diagnostics or []]
        if action.kind == types.CodeActionKind.QuickFix and "Disable for this line" not in action.title:
            ruff_offers[RUFF_APPLICABILITY[codes[0]]] = offered(action)

    (ours / "pyproject.toml").write_text(f'[tool.offload-fixer]\njax-version = "{TYPED}"\n', encoding="utf-8")
    (ours / "steps.py").write_text("def passthrough(x):\n    return x\n", encoding="utf-8")
    (ours / "kept.py").write_text(
        "import jax\nfrom jax.sharding import SingleDeviceSharding\n\nfrom steps import passthrough\n\n"
        'HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")\n'
        "kept = jax.jit(passthrough, in_shardings=HOST)\n",
        encoding="utf-8",
    )
    await start(client, client_capabilities("visual-studio-code"), ours, jaxVersion=TYPED)
    editor = Editor(client, copy_fixture("several_problems.py", ours))
    editor.open()
    diagnostics = {d.range.start.line + 1: d for d in await editor.planned_diagnostics() if d.code == "OFL1200"}
    our_offers = {}
    for line, applicability in ((16, "safe"), (19, "unsafe")):
        (fix,) = [a for a in await editor.actions([diagnostics[line]]) if a.data.get("requested") == "auto"]
        our_offers[applicability] = offered(fix)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"offload-fixer": {"strategy": "host"}})
    )
    kept = Editor(client, ours / "kept.py")
    kept.open()
    (error,) = await kept.planned_diagnostics()
    (suggestion,) = [a for a in await kept.actions([error]) if a.data.get("requested") == "host"]
    our_offers["display-only"] = offered(suggestion)
    assert "no jax.jit site for passthrough" in suggestion.disabled.reason

    assert ruff_offers == {
        "safe": (True, False, False),
        "unsafe": (False, False, False),
        "display-only": (False, True, False),
    }
    assert {k: v[:2] for k, v in our_offers.items()} == {k: v[:2] for k, v in ruff_offers.items()}
    assert our_offers["display-only"][2]  # no edit: disabled, where ruff's suggestion has one


@pytest.mark.asyncio
async def test_a_fix_no_edit_can_make_is_not_sent_to_a_client_that_cannot_show_it_disabled(
    client: LanguageClient, tmp_path
):
    (tmp_path / "steps.py").write_text("def passthrough(x):\n    return x\n", encoding="utf-8")
    path = tmp_path / "kept.py"
    path.write_text(
        "import jax\nfrom jax.sharding import SingleDeviceSharding\n\nfrom steps import passthrough\n\n"
        'HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")\n'
        "kept = jax.jit(passthrough, in_shardings=HOST)\n",
        encoding="utf-8",
    )
    await start(client, client_capabilities("neovim"), tmp_path, jaxVersion=TYPED, strategy="host")
    editor = Editor(client, path)
    editor.open()
    (error,) = await editor.planned_diagnostics()
    actions = await editor.actions([error])
    assert actions and not any(a.title.endswith(" (suggestion)") or a.disabled for a in actions)


@pytest.mark.asyncio
async def test_moving_the_streamed_argument_clears_the_diagnostic(vscode: LanguageClient, tmp_path):
    """A host in_shardings argument computed on (``x * 2``) is moved to device where the
    function starts, whatever the strategy: declaring the result host memory alone would leave
    the computation to the host CPU. The preferred fix also keeps the one array it returns (the
    argument scaled: the state it updates, as the source shows) host memory; ``--strategy
    device`` only moves. Each title says where its edits go."""
    editor = Editor(vscode, copy_fixture("in_shardings_host.py", tmp_path))
    editor.open()
    diagnostics = [the_error(await editor.diagnostics())]  # its OFL1201 has the same move

    actions = [a for a in await editor.actions(diagnostics) if a.kind == types.CodeActionKind.QuickFix]
    fixes = {a.data["requested"]: a for a in actions if "suppress" not in a.data}
    assert set(fixes) == {"auto", "device"}
    assert fixes["auto"].is_preferred and not fixes["device"].is_preferred
    assert fixes["auto"].title == (
        "offload-fixer: Move argument x to device where scale starts (line 10); "
        "keep the returned state host memory (line 13)"
    )
    assert fixes["device"].title == "offload-fixer: Move argument x to device where scale starts (line 10)"
    assert fixes["auto"].edit is None  # computed on codeAction/resolve

    moved = "    x = jax.device_put(x, jax.memory.Space.Device)\n    return x * 2\n"
    only_moved = editor.edited((await editor.resolved(fixes["device"])).edit)
    assert moved in only_moved and "out_shardings" not in only_moved
    fixed = editor.edited((await editor.resolved(fixes["auto"])).edit)
    assert moved in fixed and "jax.jit(scale, in_shardings=host, out_shardings=host)" in fixed
    editor.change(fixed)
    assert await editor.diagnostics() == []


@pytest.mark.asyncio
async def test_a_streamed_argument_returned_as_is_is_declared_host(vscode: LanguageClient, tmp_path):
    """Passed straight through, the state that enters as host leaves as host."""
    path = tmp_path / "through.py"
    path.write_text((FIXTURES / "in_shardings_host.py").read_text(encoding="utf-8").replace("x * 2", "x"))
    editor = Editor(vscode, path)
    editor.open()
    fixes = quick_fixes(await editor.actions(await editor.diagnostics()))
    assert fixes["host"].is_preferred
    fixed = editor.edited((await editor.resolved(fixes["host"])).edit)
    assert "jax.jit(scale, in_shardings=host, out_shardings=host)" in fixed
    editor.change(fixed)
    assert await editor.diagnostics() == []


@pytest.mark.parametrize("strategy", ["device", "host"])
@pytest.mark.asyncio
async def test_either_quick_fix_clears_the_diagnostic(client: LanguageClient, tmp_path, strategy):
    """Under JAX 0.6.2 (set by initializationOptions) computing on an offloaded value loses
    its memory kind: both fixes apply, and the one ``auto`` picks is preferred (the offloaded
    value is computed on, so the computation moves back to device)."""
    await start(client, client_capabilities("visual-studio-code"), tmp_path, jaxVersion="0.6.2")
    editor = Editor(client, copy_fixture("offload_then_compute.py", tmp_path))
    editor.open()
    diagnostics = await editor.diagnostics()
    assert sorted(d.code for d in diagnostics) == ["OFL1200", "OFL1201"]  # the multiply on host too

    fixes = quick_fixes(await editor.actions([the_error(diagnostics)]))
    assert set(fixes) == {"device", "host", "suppress"}
    assert fixes["device"].is_preferred and not fixes["host"].is_preferred
    resolved = await editor.resolved(fixes[strategy])
    editor.change(editor.edited(resolved.edit))
    # declared host, the output compiles, and the multiply still runs on the host CPU (as `run` reports)
    expected = [] if strategy == "device" else ["OFL1201"]
    assert [d.code for d in await editor.diagnostics()] == expected


@pytest.mark.asyncio
async def test_clients_without_resolve_or_document_changes_get_plain_edits(client: LanguageClient, tmp_path):
    await start(client, types.ClientCapabilities(), tmp_path, jaxVersion=TYPED)
    editor = Editor(client, copy_fixture("in_shardings_host.py", tmp_path))
    editor.open()
    diagnostics = await editor.diagnostics()

    action = quick_fixes(await editor.actions(diagnostics))["device"]
    assert action.edit is not None and action.edit.document_changes is None
    editor.change(editor.edited(action.edit))
    assert await editor.diagnostics() == []


@pytest.mark.asyncio
async def test_a_stale_document_version_gets_no_edits(vscode: LanguageClient, tmp_path):
    editor = Editor(vscode, copy_fixture("in_shardings_host.py", tmp_path))
    editor.open()
    diagnostics = await editor.diagnostics()
    offered = quick_fixes(await editor.actions(diagnostics))["device"]

    editor.change("# a comment the user typed meanwhile\n" + editor.text)
    resolved = await vscode.code_action_resolve_async(offered)
    assert resolved.edit is None
    assert quick_fixes(await editor.actions(diagnostics)) == {}  # the old diagnostics no longer hold


@pytest.mark.asyncio
async def test_suppressing_a_diagnostic_silences_it(vscode: LanguageClient, tmp_path):
    editor = Editor(vscode, copy_fixture("several_problems.py", tmp_path))
    editor.open()
    diagnostics = await editor.diagnostics()
    add = next(d for d in diagnostics if "`add`" in d.message)

    action = await editor.resolved(quick_fixes(await editor.actions([add]))["suppress"])
    fixed = editor.edited(action.edit)
    assert "# offload-fixer: ignore[OFL1200]\n@functools.partial(jax.jit" in fixed
    editor.change(fixed)
    remaining = await editor.diagnostics()
    assert [d.message for d in remaining] == [d.message for d in diagnostics if d is not add]


@pytest.mark.asyncio
async def test_a_client_that_drops_data_still_gets_fixes(vscode: LanguageClient, tmp_path):
    editor = Editor(vscode, copy_fixture("in_shardings_host.py", tmp_path))
    editor.open()
    diagnostic = the_error(await editor.diagnostics())
    diagnostic.data = None
    assert set(quick_fixes(await editor.actions([diagnostic]))) == {"device", "suppress"}


@pytest.mark.asyncio
async def test_fixes_apply_to_the_unsaved_text_not_the_file(vscode: LanguageClient, tmp_path):
    complete = (FIXTURES / "in_shardings_host.py").read_text(encoding="utf-8")
    jit_line = "scale_on_host = jax.jit(scale, in_shardings=host)\n"
    path = tmp_path / "unsaved.py"
    path.write_text(complete.replace(jit_line, ""), encoding="utf-8")
    editor = Editor(vscode, path)
    editor.open()
    assert await editor.diagnostics() == []
    editor.change(complete)  # the jit site exists only in the editor
    diagnostics = await editor.diagnostics()

    action = await editor.resolved(quick_fixes(await editor.actions(diagnostics))["device"])
    assert editor.edited(action.edit) == complete.replace(
        "    return x * 2\n", "    x = jax.device_put(x, jax.memory.Space.Device)\n    return x * 2\n"
    )
    assert jit_line not in path.read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------
# Fix all
@pytest.mark.asyncio
async def test_fix_all_matches_the_cli(vscode: LanguageClient, tmp_path):
    # Safe fixes to apply: JAX 0.6.2 moves host in_shardings arguments to device where the
    # function starts (0.10.2 takes the host-output fix, labelled unsafe). The file is read
    # when the first document is analysed, by the server and the CLI alike.
    (tmp_path / "pyproject.toml").write_text(
        '[tool.offload-fixer]\njax-version = "0.6.2"\nstrategy = "device"\n', encoding="utf-8"
    )
    editor = Editor(vscode, copy_fixture("several_problems.py", tmp_path))
    editor.open()
    assert len(await editor.diagnostics()) >= 2

    (action,) = await editor.actions([], only=[types.CodeActionKind.SourceFixAll])
    assert action.kind == "source.fixAll.offload-fixer" and action.edit is None
    resolved = await editor.resolved(action)
    lsp_text = editor.edited(resolved.edit)

    (tmp_path / "cli").mkdir()
    cli_copy = copy_fixture("several_problems.py", tmp_path / "cli")
    cli = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "offload_fixer.cli",
        "check",
        "--fix",
        "--exit-zero",
        "-q",
        str(cli_copy),
        cwd=tmp_path,
        env=CONFIG.server_env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert await asyncio.wait_for(cli.wait(), WAIT_S) == 0
    assert lsp_text == cli_copy.read_text(encoding="utf-8")
    assert lsp_text != editor.text


# ---------------------------------------------------------------------------------------
# Debouncing and stale analyses
@pytest.mark.parametrize("debounce_ms", [None, 0])
@pytest.mark.asyncio
async def test_quick_changes_publish_only_the_latest_version(client: LanguageClient, tmp_path, debounce_ms):
    """Two changes in a row: the first one's analysis is cancelled while it waits (debounce)
    or, with no debounce, finishes after the second change arrived and is dropped."""
    options = {} if debounce_ms is None else {"debounceMs": debounce_ms}
    await start(client, client_capabilities("visual-studio-code"), tmp_path, **options)
    clean = "import jax\n\n\ndef f(x):\n    return x\n"
    broken = (FIXTURES / "in_shardings_host.py").read_text(encoding="utf-8")
    path = tmp_path / "edited.py"
    path.write_text(clean, encoding="utf-8")
    editor = Editor(client, path)
    editor.open()
    assert await editor.diagnostics() == []

    editor.change(broken + "\n" * 2000)  # slow to analyse, and has a finding
    editor.change("\n\n" + broken)
    assert the_error(await editor.diagnostics(3)).range == expected_range(editor.text, path)
    assert editor.published(2) is None


# ---------------------------------------------------------------------------------------
# Incremental analysis
INCREMENTAL = """\
import jax
import jax.numpy as jnp
from jax.sharding import SingleDeviceSharding

host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")
device = SingleDeviceSharding(jax.devices()[0], memory_kind="device")
place = device


def helper(x):
    return x * 2


def scale(x):
    return helper(x)


scale_jit = jax.jit(scale, in_shardings=place)


@jax.jit
def unrelated(x):
    return jnp.tanh(x)
"""


def shown(diagnostics: list[types.Diagnostic]) -> list[tuple]:
    """What an editor shows of diagnostics, without the document's URI and version."""
    return [
        (
            d.code,
            d.message,
            d.range,
            [(r.location.range, r.message) for r in d.related_information or ()],
            {k: v for k, v in (d.data or {}).items() if k not in ("version", "diagnostic")},
        )
        for d in diagnostics
    ]


@pytest.mark.asyncio
async def test_edits_to_a_global_and_a_helper_reanalyse_their_users(vscode: LanguageClient, tmp_path):
    """The server keeps each document's analysis per top-level statement and re-analyses only
    what an edit affects: a global that ``in_shardings`` reads, a helper the jitted function
    calls, lines added above (which move the finding). After every edit it publishes what a
    fresh server publishes for a document opened with that text."""
    path = tmp_path / "edited.py"
    path.write_text(INCREMENTAL, encoding="utf-8")
    editor = Editor(vscode, path)
    editor.open()
    assert await editor.diagnostics() == []
    streamed = INCREMENTAL.replace("place = device", "place = host")  # the global: scale_jit streams x
    versions = [
        streamed,
        streamed.replace("jnp.tanh(x)", "jnp.tanh(x) + 1"),
        streamed.replace("return x * 2", "return jax.device_put(x, jax.memory.Space.Device) * 2"),  # the helper
        streamed,
        "# moved down\n\n" + streamed,
    ]
    published = []
    for text in versions:
        editor.change(text)
        published.append(await editor.planned_diagnostics())
    assert [len(p) for p in published] == [2, 2, 0, 2, 2]  # OFL1200, and OFL1201 for the helper's multiply
    assert published[4][0].range.start.line == published[0][0].range.start.line + 2
    for index, text in enumerate(versions):
        fresh = tmp_path / f"fresh_{index}.py"
        fresh.write_text(text, encoding="utf-8")
        opened = Editor(vscode, fresh)
        opened.open()
        assert shown(await opened.planned_diagnostics()) == shown(published[index]), text


# ---------------------------------------------------------------------------------------
# Configuration
@pytest.mark.asyncio
async def test_configuration_from_pyproject_and_from_the_editor(client: LanguageClient, tmp_path):
    """The pattern is an error for JAX 0.6.2 only: which JAX the server checks for shows."""
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.offload-fixer]\njax-version = "0.6.2"\n', encoding="utf-8")
    await start(client, client_capabilities("visual-studio-code"), tmp_path)
    editor = Editor(client, copy_fixture("offload_then_compute.py", tmp_path))
    editor.open()
    assert sorted(d.code for d in await editor.diagnostics()) == ["OFL1200", "OFL1201"]

    async def next_publish(notify) -> list[types.Diagnostic]:
        seen = len(client.published)
        notify()
        return list(
            (await wait_for(lambda: client.published[-1] if len(client.published) > seen else None)).diagnostics
        )

    (watcher,) = await wait_for(lambda: client.registrations or None)
    assert watcher.register_options["watchers"] == [
        {"globPattern": "**/pyproject.toml"},
        {"globPattern": "**/.offload-fixer/last-run.json"},
    ]
    pyproject.write_text(f'[tool.offload-fixer]\njax-version = "{TYPED}"\n', encoding="utf-8")
    changed = types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Changed)
    republished = await next_publish(
        lambda: client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[changed]))
    )
    # JAX 0.10.2 types the product host memory: the output compiles, the multiply runs on host
    assert [d.code for d in republished] == ["OFL1201"]

    settings = {"offload-fixer": {"jaxVersion": "0.6.2"}}  # the editor's setting wins over the file
    diagnostics = await next_publish(
        lambda: client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=settings))
    )
    assert sorted(d.code for d in diagnostics) == ["OFL1200", "OFL1201"]


@pytest.mark.asyncio
async def test_a_broken_configuration_is_shown_once_and_defaults_apply(client: LanguageClient, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.offload-fixer]\ntarget = "cpu"\n', encoding="utf-8")
    await start(client, client_capabilities("visual-studio-code"), tmp_path, jaxVersion=TYPED)
    editor = Editor(client, copy_fixture("in_shardings_host.py", tmp_path))
    editor.open()
    assert sorted(d.code for d in await editor.diagnostics()) == ["OFL1200", "OFL1201"]
    editor.change(editor.text + "\n")
    await editor.diagnostics()

    (message,) = client.messages
    assert message.type == types.MessageType.Error and "target" in message.message


@pytest.mark.asyncio
async def test_exclude_is_the_one_the_command_line_applies(client: LanguageClient, tmp_path):
    """``exclude = ["src/gen/*.py"]``: the file ``offload-fixer check src/`` and ``check .``
    leave out (tests/test_cli.py) gets no diagnostics in the editor; its sibling does."""
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.offload-fixer]\njax-version = "{TYPED}"\nexclude = ["src/gen/*.py"]\n', encoding="utf-8"
    )
    (tmp_path / "src" / "gen").mkdir(parents=True)
    await start(client, client_capabilities("visual-studio-code"), tmp_path)
    kept = Editor(client, copy_fixture("in_shardings_host.py", tmp_path / "src"))
    generated = Editor(client, copy_fixture("in_shardings_host.py", tmp_path / "src" / "gen"))
    generated.open()
    kept.open()
    assert sorted(d.code for d in await kept.diagnostics()) == ["OFL1200", "OFL1201"]
    assert await generated.diagnostics() == []


# ---------------------------------------------------------------------------------------
# Positions
@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
@pytest.mark.asyncio
async def test_positions_use_the_negotiated_encoding(client: LanguageClient, tmp_path, encoding):
    capabilities = types.ClientCapabilities(
        general=types.GeneralClientCapabilities(position_encodings=[encoding]),
        workspace=types.WorkspaceClientCapabilities(
            workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True)
        ),
    )
    await start(client, capabilities, tmp_path, jaxVersion=TYPED)
    text = (FIXTURES / "in_shardings_host.py").read_text(encoding="utf-8").replace("scale", "échelle_𝔥")
    text = text.replace("x * 2", "x")  # passed through: the host fix edits the jit line, after the accents
    path = tmp_path / "accents.py"
    path.write_text(text, encoding="utf-8")
    editor = Editor(client, path, encoding)
    editor.open()
    (diagnostic,) = await editor.diagnostics()
    assert diagnostic.range == expected_range(text, path, encoding)
    assert diagnostic.range != expected_range(text, path, {"utf-8": "utf-16"}.get(encoding, "utf-8"))

    action = quick_fixes(await editor.actions([diagnostic]))["host"]
    fixed = editor.edited(action.edit)
    assert fixed == text.replace("in_shardings=host)", "in_shardings=host, out_shardings=host)")


# ---------------------------------------------------------------------------------------
# Minimal edits, against pygls' document model as the oracle
@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_minimal_edits_rebuild_the_new_text(encoding):
    pieces = ["a", "b", "\n", "é", "😋", " ", "x = 1\n", "\t"]
    rng = random.Random(encoding)
    for _ in range(300):
        old = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 24)))
        new = list(old)
        for _ in range(rng.randint(1, 4)):
            index = rng.randint(0, len(new))
            if new and rng.random() < 0.5:
                del new[min(index, len(new) - 1)]
            else:
                new.insert(index, rng.choice(pieces))
        new_text = "".join(new)
        document = TextDocument("file:///t.py", old, position_codec=PositionCodec(encoding))
        for edit in reversed(minimal_edits(old, new_text, encoding)):
            document.apply_change(types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text))
        assert document.source == new_text


def test_minimal_edits_touch_only_what_changed_and_keep_crlf():
    old = "import jax\r\n\r\nf = jax.jit(g, in_shardings=host)\r\n"
    new = "import jax\r\n\r\nf = jax.jit(g, in_shardings=host, out_shardings=host)\r\n"
    (edit,) = minimal_edits(old, new, "utf-16")
    assert edit.new_text == ", out_shardings=host"
    assert edit.range.start == edit.range.end == types.Position(2, len("f = jax.jit(g, in_shardings=host"))

    # A line end changed from CRLF to LF: the edit never splits the CRLF pair.
    (edit,) = minimal_edits("a\r\nb", "a\nb", "utf-16")
    assert (edit.range.start, edit.range.end, edit.new_text) == (types.Position(0, 1), types.Position(1, 0), "\n")


def test_lines_end_only_where_lsp_says():
    """Form feeds and U+2028 are not line ends for LSP, though ``str.splitlines`` thinks so."""
    text = "a\x0cb\u2028c\rd\r\ne\nf"
    assert split_lines(text) == ["a\x0cb\u2028c\r", "d\r\n", "e\n", "f"]
    assert LineIndex.of(text).position(text.index("f"), "utf-16") == types.Position(3, 0)


# ---------------------------------------------------------------------------------------
# Clients as they are: Neovim 0.7 (Debian 12), and clients that never resolve code actions
@pytest.mark.asyncio
async def test_neovim_0_7_resolves_the_actions_it_is_offered(client: LanguageClient, tmp_path):
    """Neovim 0.7 declares ``resolveSupport: {properties: ["edit"]}`` and resolves an action
    without an edit; it takes ``changes`` (no ``documentChanges``) and echoes ``data``."""
    capabilities = client_capabilities("neovim@v0.7.0")
    assert capabilities.text_document.code_action.resolve_support.properties == ["edit"]
    assert not capabilities.workspace.workspace_edit.document_changes
    await start(client, capabilities, tmp_path, jaxVersion=TYPED)
    editor = Editor(client, copy_fixture("in_shardings_host.py", tmp_path))
    editor.open()
    diagnostics = await editor.diagnostics()

    offered = preferred_fix(await editor.actions([the_error(diagnostics)]))
    assert offered.edit is None
    resolved = await client.code_action_resolve_async(offered)
    assert resolved.edit.document_changes is None and list(resolved.edit.changes) == [editor.uri]
    editor.change(editor.edited(resolved.edit))
    assert await editor.diagnostics() == []


@pytest.mark.parametrize(
    "code_action",
    [
        None,  # no codeAction capabilities at all
        types.CodeActionClientCapabilities(
            resolve_support=types.ClientCodeActionResolveOptions(properties=["command"])
        ),
    ],
    ids=["no-resolve-support", "resolves-other-properties"],
)
@pytest.mark.asyncio
async def test_a_client_that_does_not_resolve_edits_gets_them_with_the_actions(
    client: LanguageClient, tmp_path, code_action
):
    capabilities = types.ClientCapabilities(text_document=types.TextDocumentClientCapabilities(code_action=code_action))
    await start(client, capabilities, tmp_path, jaxVersion=TYPED)
    editor = Editor(client, copy_fixture("in_shardings_host.py", tmp_path))
    editor.open()
    diagnostics = await editor.diagnostics()

    actions = await editor.actions([the_error(diagnostics)])
    assert actions and all(action.edit is not None for action in actions)  # fixes, suppression, fix-all
    editor.change(editor.edited(preferred_fix(actions).edit))
    assert await editor.diagnostics() == []


NVIM = shutil.which("nvim")
DRIVE_NEOVIM = """
-- The test's part: wait for offload-fixer's diagnostics, take the preferred fix the way a
-- user does (vim.lsp.buf.code_action, answering its menu), save and quit.
local function record(text)
  local out = io.open(vim.env.OFFLOAD_FIXER_RESULT, "a"); out:write(text .. "\\n"); out:close()
end
vim.api.nvim_create_autocmd("VimEnter", { callback = function()
  vim.defer_fn(function()
    local found = vim.wait(120000, function() return #vim.diagnostic.get(0) > 0 end, 50)
    if not found then record("no diagnostics"); vim.cmd("qa!") return end
    local first
    for _, d in ipairs(vim.diagnostic.get(0)) do
      if d.code == "OFL1200" then first = d; break end
    end
    if not first then record("no OFL1200"); vim.cmd("qa!") return end
    record("diagnostic " .. first.code .. " line " .. (first.lnum + 1))
    vim.api.nvim_win_set_cursor(0, { first.lnum + 1, first.col })
    vim.ui.select = function(items, _, choose)
      for index, item in ipairs(items) do
        if item[2].isPreferred then record("chose " .. item[2].title); return choose(item, index) end
      end
      record("nothing preferred"); choose(nil, nil)
    end
    vim.lsp.buf.code_action()
    if vim.wait(120000, function() return vim.bo.modified end, 50) then record("edited") end
    vim.cmd("write")
    vim.cmd("qa!")
  end, 0)
end })
"""


def readme_neovim_config() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("```lua\n-- offload-fixer: one language server")
    return text[start + len("```lua\n") : text.index("```", start + 6)]


REQUIRE_NEOVIM = bool(os.environ.get("OFFLOAD_FIXER_REQUIRE_NEOVIM"))
"""Set by CI (``.ci/run`` installs Neovim): the Neovim test fails where Neovim is missing."""


@pytest.mark.slow
@pytest.mark.skipif(
    NVIM is None and not REQUIRE_NEOVIM, reason="Neovim is not installed (apt-get install neovim gives Debian's 0.7.2)"
)
def test_the_readme_neovim_setup_fixes_a_file_in_neovim(tmp_path):
    import subprocess

    assert NVIM is not None, "OFFLOAD_FIXER_REQUIRE_NEOVIM is set and there is no nvim on the PATH"
    path = copy_fixture("in_shardings_host.py", tmp_path)
    (tmp_path / "pyproject.toml").write_text(f'[tool.offload-fixer]\njax-version = "{TYPED}"\n', encoding="utf-8")
    init = tmp_path / "init.lua"
    init.write_text(readme_neovim_config() + DRIVE_NEOVIM, encoding="utf-8")
    result = tmp_path / "result.txt"
    env = {
        **CONFIG.server_env,
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
        "OFFLOAD_FIXER_RESULT": str(result),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    if not shutil.which("offload-fixer", path=env["PATH"]):
        pytest.skip("the offload-fixer entry point is not installed next to this Python")
    proc = subprocess.run(
        [NVIM, "--headless", "-n", "-i", "NONE", "-u", str(init), path.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = result.read_text() if result.exists() else ""
    assert proc.returncode == 0, proc.stdout + proc.stderr + log
    # the preferred fix is the configured strategy's (auto): the move, and the state kept host
    assert log.splitlines() == [
        "diagnostic OFL1200 line 13",
        "chose offload-fixer: Move argument x to device where scale starts (line 10); "
        "keep the returned state host memory (line 13)",
        "edited",
    ], proc.stderr
    fixed = path.read_text(encoding="utf-8")
    assert "    x = jax.device_put(x, jax.memory.Space.Device)\n" in fixed
    assert "jax.jit(scale, in_shardings=host, out_shardings=host)" in fixed
    compile(fixed, str(path), "exec")


NESTED_SHARDINGS = """\
import jax
from jax.sharding import NamedSharding, PartitionSpec as P

STASH = NamedSharding(jax.make_mesh((1,), ("data",)), P(), memory_kind="pinned_host")
"""
NESTED_MAIN = """\
import jax

from mypkg.shardings import STASH


def scale(x):
    return x * 2


step = jax.jit(scale, in_shardings=STASH)
"""


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "package, script",
    [("mypkg", "sub/main.py"), ("src/mypkg", "scripts/train.py"), ("mypkg", "tools/deep/er/run.py")],
)
async def test_a_nested_script_resolves_a_root_package_as_check_and_pre_commit_do(
    vscode: LanguageClient, tmp_path, package, script
):
    """``sub/main.py`` importing ``mypkg`` from the project root (or from ``src/``): the
    language server, ``check FILE`` (what pre-commit runs, from the root and from the file's
    directory) and ``check .`` find the same finding at the same line."""
    from tests.cli_support import offload_fixer

    (tmp_path / package).mkdir(parents=True)
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "shardings.py").write_text(NESTED_SHARDINGS)
    main = tmp_path / script
    main.parent.mkdir(parents=True)
    main.write_text(NESTED_MAIN)
    editor = Editor(vscode, main)
    editor.open()
    served = [(d.code, d.range.start.line + 1) for d in await editor.diagnostics()]
    assert served == [("OFL1201", 7), ("OFL1200", 10)]  # the multiply on the host argument, then the output
    for cwd, args in ((tmp_path, [script]), (main.parent, [main.name]), (tmp_path, ["."])):
        proc = offload_fixer("check", "--output-format", "concise", *args, cwd=cwd)
        found = [line.split(" [")[0] for line in proc.stdout.splitlines() if "OFL" in line]
        where = os.path.relpath(main, cwd)
        assert found == [f"{where}:10:23: OFL1200", f"{where}:7:12: OFL1201"], proc.stdout + proc.stderr
