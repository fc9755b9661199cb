"""The language server: static diagnostics as you type, quick fixes and a fix-all action.

Nothing here executes user code: diagnostics come from the static check and from the report
the last ``offload-fixer run`` left (``.offload-fixer/last-run.json``), edits from the same
codemods as ``offload-fixer fix``, run on the editor's in-memory text. Every published
diagnostic carries its fixes in ``data`` (ruff's design), so a code-action request is
answered from that data; edits are computed only when the client resolves an action.
Notebook documents (``notebookDocument/*``) are checked as one program per notebook and
published per cell (:mod:`offload_fixer.lsp.notebooks`).

Over 500 lines on purpose: the server's handlers share one document state and its published
diagnostics; the engine and notebooks live beside it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from offload_fixer import last_run
from offload_fixer.config import Settings
from offload_fixer.lsp import engine, notebooks
from offload_fixer.lsp.fix_choices import FixChoice
from offload_fixer.lsp.publishing import NAME, SEVERITY, fix_actions, message_of, one_per_fix
from offload_fixer.lsp.settings import ChangeClock, ClientOptions, SettingsStore
from offload_fixer.lsp.text_edits import LineIndex, minimal_edits, span_range
from offload_fixer.lsp.worker import AnalysisWorker
from offload_fixer.model import Diagnostic, Span
from offload_fixer.version import __version__

log = logging.getLogger(__name__)

FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.{NAME}"
DYNAMIC_SUFFIX = " [found by `offload-fixer run`]"
PLAN_AFTER_S = 0.3
"""How long a document stays unchanged after its findings are published before their quick
fixes are planned (the planner reads the whole text; a code action plans them at once). A
change meanwhile cancels the planning, so it never holds up the analysis of the next version."""
"""Told apart from the static check's: the run saw it happen in a real compilation."""


@dataclass
class DocumentState:
    """What the server knows about one open document beyond its text."""

    pending: asyncio.Task | None = None
    clock: ChangeClock = field(default_factory=ChangeClock)
    """When it last changed, and whether an analysis is outstanding (the debounce)."""
    analysed_version: int | None = None
    analysis: engine.Analysis | None = None
    published: list[types.Diagnostic] = field(default_factory=list)


class OffloadFixerServer(LanguageServer):
    def __init__(self, analysis_pool: AnalysisWorker) -> None:
        # Incremental: VS Code sends a notebook cell's edits as ranges whatever a server asks
        # for (vscode-languageclient's notebook sync), and pygls applies both kinds under it.
        super().__init__(
            NAME,
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=notebooks.SYNC_OPTIONS,
        )
        self.documents: dict[str, DocumentState] = {}
        self.notebooks = notebooks.NotebookDocuments(self)
        self.settings = SettingsStore()
        self.shown_errors: set[str] = set()
        self.refused: set[str] = set()
        """Documents told they are too large to analyse (told once each)."""
        self.analysis_pool = analysis_pool
        """One worker (:mod:`.worker`): analyses run one at a time, so a stale one never competes
        with the latest."""

    # ------------------------------------------------------------------ capabilities
    @property
    def encoding(self) -> str:
        return str(self.workspace.position_encoding or types.PositionEncodingKind.Utf16)

    def supports_resolve(self, prop: str) -> bool:
        properties = get_capability(
            self.client_capabilities, "text_document.code_action.resolve_support.properties", []
        )
        return prop in (properties or [])

    def supports_disabled(self) -> bool:
        """Whether the client shows a code action it cannot apply, with the reason (``disabled``)."""
        return bool(get_capability(self.client_capabilities, "text_document.code_action.disabled_support", False))

    def supports_document_changes(self) -> bool:
        return bool(get_capability(self.client_capabilities, "workspace.workspace_edit.document_changes", False))

    # ------------------------------------------------------------------ analysis
    def changed(self, uri: str) -> None:
        """The editor changed ``uri``: analyse it at once, or after the debounce in a burst of changes."""
        state = self.documents.setdefault(uri, DocumentState())
        self.schedule(uri, state.clock.delay_for_change(self.settings.debounce_s))

    def schedule(self, uri: str, delay: float) -> None:
        """(Re)start the analysis of ``uri`` after ``delay`` seconds; a newer change cancels it,
        and cuts short any planning of quick fixes the worker is doing (:mod:`.superseding`)."""
        state = self.documents.setdefault(uri, DocumentState())
        if state.pending is not None and not state.pending.done():
            state.pending.cancel()
        self.analysis_pool.changes.advance()
        state.clock.outstanding = True
        state.pending = asyncio.get_running_loop().create_task(self._analyse_later(uri, delay))

    async def _analyse_later(self, uri: str, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        document = self.workspace.text_documents.get(uri)
        if document is None:
            return
        version, text, path = document.version, document.source, _path_of(uri)
        # The findings first, their quick fixes (planned on the whole text) in a second publish,
        # once the document is still: tried again while a change elsewhere cuts them short.
        plan = False
        while True:
            analysis = await self._document_analysis(uri, text, path, plan)
            state = self.documents.get(uri)
            current = self.workspace.text_documents.get(uri)
            if (
                analysis is None
                or state is None
                or current is None
                or current.version != version
                or current.source != text
            ):
                return  # the document changed while we analysed: its own analysis is on the way
            if analysis.planned or not plan:
                self._publish(uri, state, version, text, path, analysis)
            if analysis.planned:
                return
            plan = True
            await asyncio.sleep(PLAN_AFTER_S)

    async def _document_analysis(
        self, uri: str, text: str, path: str, plan: bool, supersedable: bool = True
    ) -> engine.Analysis | None:
        """The analysis of ``text``; with ``plan``, its quick fixes too, unless a change comes
        first where ``supersedable`` (then it is returned unplanned)."""
        settings = self.settings_for(path)
        loop = asyncio.get_running_loop()
        ticket = self.analysis_pool.changes.ticket() if plan and supersedable else None
        try:
            return await loop.run_in_executor(
                self.analysis_pool, engine.document_analysis, text, path, settings, plan, ticket
            )
        except Exception as exc:  # a checker bug must not take the server down
            log.exception("analysis of %s failed", uri)
            self.window_log_message(types.LogMessageParams(types.MessageType.Error, f"offload-fixer: {uri}: {exc!r}"))
            return None

    async def planned(self, uri: str, version: int | None) -> None:
        """Plan the fix choices of the analysis of ``version`` now, if its second publish has
        not come yet (a code action asked first), and publish them."""
        state = self.documents.get(uri)
        document = self.workspace.text_documents.get(uri)
        if state is None or document is None or state.analysis is None or state.analysis.planned:
            return
        if state.analysed_version != version or document.version != version:
            return
        text, path = document.source, _path_of(uri)
        analysis = await self._document_analysis(uri, text, path, True, supersedable=False)
        document = self.workspace.text_documents.get(uri)
        if analysis is not None and document is not None and document.version == version and document.source == text:
            self._publish(uri, state, version, text, path, analysis)

    def _publish(
        self, uri: str, state: DocumentState, version: int | None, text: str, path: str, analysis: engine.Analysis
    ) -> None:
        state.analysed_version = version
        state.analysis = analysis
        state.clock.outstanding = False
        if analysis.refused is not None and uri not in self.refused:
            self.refused.add(uri)
            self.window_show_message(
                types.ShowMessageParams(types.MessageType.Warning, f"offload-fixer: {analysis.refused}")
            )
        index = LineIndex.of(text)
        state.published = [
            self.to_lsp(d, fixes, uri, path, index, version, analysis.planned) for d, fixes in analysis.items()
        ]
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=state.published, version=version)
        )

    def settings_for(self, path: str) -> Settings:
        """Settings for a document; a broken configuration is shown to the user once."""
        settings = self.settings.for_path(path, self.workspace.root_path)
        for message in self.settings.errors:
            if message not in self.shown_errors:
                self.shown_errors.add(message)
                self.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"offload-fixer: {message}"))
        self.settings.errors.clear()
        return settings

    async def watch_configuration_files(self) -> None:
        """Ask the client to report changes of ``pyproject.toml`` and of the last ``offload-fixer
        run``'s report, where it can watch files."""
        if not get_capability(
            self.client_capabilities, "workspace.did_change_watched_files.dynamic_registration", False
        ):
            return
        options = types.DidChangeWatchedFilesRegistrationOptions(
            watchers=[
                types.FileSystemWatcher(glob_pattern="**/pyproject.toml"),
                types.FileSystemWatcher(glob_pattern=last_run.WATCH_GLOB),
            ]
        )
        registration = types.Registration(
            id=f"{NAME}-pyproject", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
        )
        try:
            await self.client_register_capability_async(types.RegistrationParams(registrations=[registration]))
        except (JsonRpcException, RuntimeError) as exc:
            log.warning("the client did not register the pyproject.toml watcher: %s", exc)

    def reanalyse_all(self) -> None:
        for uri in list(self.documents):
            if uri in self.workspace.text_documents:
                self.schedule(uri, 0)
        for uri in list(self.notebooks.states):
            self.notebooks.schedule(uri, 0)

    # ------------------------------------------------------------------ conversion
    def to_lsp(
        self,
        diagnostic: Diagnostic,
        fixes: tuple[FixChoice, ...],
        uri: str,
        path: str,
        index: LineIndex,
        version: int | None,
        planned: bool = True,
    ) -> types.Diagnostic:
        span = engine.primary_span(diagnostic)
        preferred = next((f for f in fixes if f.preferred), None)
        url = engine.rule_url(diagnostic.code)
        return types.Diagnostic(
            range=span_range(span, index, self.encoding),
            message=message_of(diagnostic, DYNAMIC_SUFFIX if diagnostic.source == "dynamic" else ""),
            severity=SEVERITY.get(diagnostic.severity, types.DiagnosticSeverity.Warning),
            code=diagnostic.code,
            code_description=types.CodeDescription(href=url) if url else None,
            source=NAME,
            related_information=self.related(diagnostic, uri, path, index) or None,
            data={
                "code": diagnostic.code,
                "title": engine.rule_title(diagnostic.code),
                "version": version,
                # None: not planned yet (the publish that follows has them; a code action plans them)
                "applicability": (preferred.safety if preferred else "none") if planned else None,
                "fixes": [f.to_data() for f in fixes] if planned else None,
                "diagnostic": diagnostic.to_dict() if fixes or not planned else None,
            },
        )

    def related(
        self, diagnostic: Diagnostic, uri: str, path: str, index: LineIndex
    ) -> list[types.DiagnosticRelatedInformation]:
        """Links to the move to host, each step of the trace and the output it reaches."""
        found = []

        def add(span: Span | None, message: str) -> None:
            if span is None:
                return
            same_file = engine.same_path(span.path, path)
            target_uri = uri if same_file else engine.uri_of(span.path)
            range_ = span_range(span, index, self.encoding) if same_file else _plain_range(span)
            found.append(types.DiagnosticRelatedInformation(types.Location(target_uri, range_), message))

        for span, message in engine.related_spans(diagnostic):
            add(span, message)
        return found

    # ------------------------------------------------------------------ code actions
    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        notebook = self.notebooks.notebook_of(uri)
        if notebook is not None:
            actions: list[types.CodeAction] = self.notebooks.code_actions(params, notebook, _wanted, FIX_ALL_KIND)
            if self.supports_resolve("edit"):
                return actions
            return [await self.notebooks.resolve(action) for action in actions]
        document = self.workspace.text_documents.get(uri)
        if document is None:
            return []
        only = params.context.only
        actions = []
        await self.planned(uri, document.version)
        if _wanted(types.CodeActionKind.QuickFix, only):
            fixes = (a for d in params.context.diagnostics for a in self.quick_fixes(d, uri, document.version))
            actions.extend(one_per_fix(fixes))
        if _wanted(FIX_ALL_KIND, only) and self.offers_fix_all(uri, document.version, only):
            actions.append(
                types.CodeAction(
                    title="offload-fixer: Fix all safe fixes",
                    kind=FIX_ALL_KIND,
                    data={"uri": uri, "version": document.version, "fix_all": True},
                )
            )
        if self.supports_resolve("edit"):
            return actions
        return [await self.resolve(action) for action in actions]

    def quick_fixes(self, diagnostic: types.Diagnostic, uri: str, version: int | None) -> list[types.CodeAction]:
        """One action per fix in the diagnostic's ``data``, plus one that suppresses it:
        nothing is analysed again."""
        data = self.data_of(diagnostic, uri, version) if diagnostic.source == NAME else None
        if data is None:
            return []
        actions = fix_actions(diagnostic, data, {"uri": uri, "version": version}, self.supports_disabled())
        code = data["code"]
        actions.append(
            types.CodeAction(
                title=f"offload-fixer: Suppress {code} for this statement",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                data={"uri": uri, "version": version, "suppress": code, "line": diagnostic.range.start.line + 1},
            )
        )
        return actions

    def data_of(self, diagnostic: types.Diagnostic, uri: str, version: int | None) -> dict | None:
        """The ``data`` published with a diagnostic, if it was published for the text the
        client holds now (older ranges no longer hold). A client that drops ``data`` gets it
        back from the last publish by range, code and message."""
        if isinstance(diagnostic.data, dict) and diagnostic.data.get("fixes") is not None:
            return diagnostic.data if diagnostic.data.get("version") == version else None
        if isinstance(diagnostic.data, dict) and diagnostic.data.get("version") != version:
            return None
        state = self.documents.get(uri)
        if state is None or state.analysed_version != version:
            return None
        for published in state.published:
            if (published.range, published.code, published.message) == (
                diagnostic.range,
                diagnostic.code,
                diagnostic.message,
            ):
                return published.data
        return None

    def offers_fix_all(self, uri: str, version: int | None, only: Sequence[str] | None) -> bool:
        """Always when the client asks for fix-all by kind (fix on save); otherwise only when
        the current analysis has a safe fix to apply."""
        if only:
            return True
        state = self.documents.get(uri)
        if state is None or state.analysed_version != version or state.analysis is None:
            return False
        return any(f.safety == "safe" for _, fixes in state.analysis.items() for f in fixes)

    async def resolve(self, action: types.CodeAction) -> types.CodeAction:
        """Fill in ``action.edit``; leave it empty when the document moved on since the action
        was offered (a stale version must never rewrite newer text)."""
        data = action.data if isinstance(action.data, dict) else {}
        if data.get("notebook"):
            return await self.notebooks.resolve(action)
        uri = data.get("uri")
        document = self.workspace.text_documents.get(uri) if uri else None
        if not uri or document is None or document.version != data.get("version"):
            return action
        version, text, path = document.version, document.source, _path_of(uri)
        settings = self.settings_for(path)
        loop = asyncio.get_running_loop()
        if data.get("fix_all"):
            new_text = await loop.run_in_executor(self.analysis_pool, engine.fix_all, text, path, settings)
        elif data.get("suppress"):
            new_text = await loop.run_in_executor(
                self.analysis_pool, engine.suppress, text, path, data["line"], data["suppress"]
            )
        elif data.get("diagnostic"):
            diagnostic = Diagnostic.from_dict(data["diagnostic"])
            new_text = await loop.run_in_executor(
                self.analysis_pool,
                engine.apply_fix,
                text,
                path,
                diagnostic,
                data.get("requested") or data.get("strategy") or "auto",
                settings,
            )
        else:
            return action
        current = self.workspace.text_documents.get(uri)
        if new_text is None or new_text == text or current is None or current.version != version:
            return action
        action.edit = self.workspace_edit(uri, version, minimal_edits(text, new_text, self.encoding))
        return action

    def workspace_edit(self, uri: str, version: int | None, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
        if self.supports_document_changes():
            identifier = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(identifier, edits)])
        return types.WorkspaceEdit(changes={uri: edits})


def _wanted(kind: str, only: Sequence[str] | None) -> bool:
    """LSP kinds are hierarchical: ``source`` asks for ``source.fixAll.offload-fixer`` too."""
    if not only:
        return True
    return any(kind == k or kind.startswith(f"{k}.") for k in only)


def _plain_range(span: Span) -> types.Range:
    """A range in a file we do not hold: code-point columns are the best we can do."""
    start = types.Position(max(span.line - 1, 0), max(span.col - 1, 0))
    end_line = span.end_line if span.end_line is not None else span.line
    end_col = span.end_col if span.end_col is not None else span.col
    return types.Range(start, types.Position(max(end_line - 1, 0), max(end_col - 1, 0)))


def _path_of(uri: str) -> str:
    return to_fs_path(uri) or uri


# ---------------------------------------------------------------------------------------
# Wiring
def build_server(analysis_pool: AnalysisWorker) -> OffloadFixerServer:
    server = OffloadFixerServer(analysis_pool)

    @server.feature(types.INITIALIZE)
    def initialize(ls: OffloadFixerServer, params: types.InitializeParams) -> None:
        ls.settings.set_client(ClientOptions.parse(params.initialization_options))

    @server.feature(types.INITIALIZED)
    async def initialized(ls: OffloadFixerServer, params: types.InitializedParams) -> None:
        await ls.watch_configuration_files()
        if await ls.settings.pull(ls):
            ls.reanalyse_all()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: OffloadFixerServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: OffloadFixerServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.changed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: OffloadFixerServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri.endswith("/pyproject.toml"):
            ls.settings.forget_files()
            ls.reanalyse_all()
        elif uri in ls.workspace.text_documents:
            ls.schedule(uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: OffloadFixerServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        state = ls.documents.pop(uri, None)
        if state is not None and state.pending is not None:
            state.pending.cancel()
        ls.analysis_pool.submit(engine.forget, _path_of(uri))  # after any analysis still running
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_did_open(ls: OffloadFixerServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.notebooks.schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_did_change(ls: OffloadFixerServer, params: types.DidChangeNotebookDocumentParams) -> None:
        ls.notebooks.changed(params.notebook_document.uri, ls.settings.debounce_s)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_did_save(ls: OffloadFixerServer, params: types.DidSaveNotebookDocumentParams) -> None:
        ls.notebooks.schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(ls: OffloadFixerServer, params: types.DidCloseNotebookDocumentParams) -> None:
        ls.notebooks.close(params.notebook_document.uri, [cell.uri for cell in params.cell_text_documents])

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: OffloadFixerServer, params: types.DidChangeConfigurationParams) -> None:
        if ls.settings.set_client_section(params.settings) or await ls.settings.pull(ls):
            ls.reanalyse_all()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: OffloadFixerServer, params: types.DidChangeWatchedFilesParams) -> None:
        if any(change.uri.endswith("/pyproject.toml") for change in params.changes):
            ls.settings.forget_files()
            ls.reanalyse_all()
        elif any(change.uri.endswith(f"/{last_run.DIRECTORY}/{last_run.FILE_NAME}") for change in params.changes):
            ls.reanalyse_all()

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL_KIND],
            resolve_provider=True,
        ),
    )
    async def code_action(ls: OffloadFixerServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return await ls.code_actions(params)

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: OffloadFixerServer, action: types.CodeAction) -> types.CodeAction:
        return await ls.resolve(action)

    return server
