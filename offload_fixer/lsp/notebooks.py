"""Notebook documents in the language server (``notebookDocument/*`` sync, LSP 3.17).

An editor that syncs a notebook sends its cells as text documents of their own
(``vscode-notebook-cell:...#W0sZmlsZQ==``). The server checks the notebook's code cells as
one program, as the CLI does (``offload_fixer.notebook.Program``), and publishes each finding
on the cell it points into, with related locations in the other cells it names. Quick fixes,
suppressions and fix-all run on that program too (``engine``'s functions, unchanged); the
new program is cut back into cells and sent as one versioned edit per changed cell.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote

from lsprotocol import types
from pygls.uris import to_fs_path

from offload_fixer.lsp import engine
from offload_fixer.lsp.fix_choices import FixChoice
from offload_fixer.lsp.publishing import NAME, SEVERITY, fix_actions, message_of, one_per_fix
from offload_fixer.lsp.settings import ChangeClock
from offload_fixer.lsp.text_edits import LineIndex, minimal_edits, span_range
from offload_fixer.model import Diagnostic, Span
from offload_fixer.notebook import CellSplitError, Program

if TYPE_CHECKING:
    from pygls.workspace import Workspace

    from offload_fixer.config import Settings
    from offload_fixer.lsp.worker import AnalysisWorker

log = logging.getLogger(__name__)

SYNC_OPTIONS = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithCells(cells=[types.NotebookCellLanguage("python")], notebook="*")
    ],
    save=True,
)
"""Every notebook type (Jupyter, VS Code's interactive window...), its Python cells."""


@dataclass(frozen=True)
class Snapshot:
    """A notebook's code cells at one notebook version, as one program."""

    uri: str
    path: str
    version: int
    cell_uris: tuple[str, ...]
    """URI of each code cell, in the program's order (cell number = index + 1)."""
    cell_versions: tuple[int, ...]
    program: Program

    def cell_uri(self, number: int) -> str:
        return self.cell_uris[number - 1]


@dataclass
class NotebookState:
    pending: asyncio.Task | None = None
    clock: ChangeClock = field(default_factory=ChangeClock)
    """When it last changed, and whether an analysis is outstanding (the debounce)."""
    snapshot: Snapshot | None = None
    analysis: engine.Analysis | None = None
    published: dict[str, list[types.Diagnostic]] = field(default_factory=dict)


class Server(Protocol):
    """What the notebook documents ask of the language server (:mod:`.server`'s, which
    holds them, so this module does not import it)."""

    analysis_pool: AnalysisWorker

    @property
    def workspace(self) -> Workspace: ...

    @property
    def encoding(self) -> str: ...

    def settings_for(self, path: str) -> Settings: ...

    def supports_document_changes(self) -> bool: ...

    def supports_disabled(self) -> bool: ...

    def text_document_publish_diagnostics(self, params: types.PublishDiagnosticsParams) -> None: ...

    def window_log_message(self, params: types.LogMessageParams) -> None: ...


class NotebookDocuments:
    """What the server knows about open notebooks, and how it answers for their cells."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.states: dict[str, NotebookState] = {}

    # ------------------------------------------------------------------ documents
    def notebook_of(self, cell_uri: str) -> types.NotebookDocument | None:
        return self.server.workspace.get_notebook_document(cell_uri=cell_uri)

    def snapshot(self, notebook_uri: str) -> Snapshot | None:
        notebook = self.server.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is None:
            return None
        documents = self.server.workspace.text_documents
        cells = []
        for cell in notebook.cells:
            document = documents.get(unquote(cell.document))
            if cell.kind == types.NotebookCellKind.Code and document is not None:
                cells.append((cell.document, document.version or 0, document.source))
        program = Program((number, text) for number, (_, _, text) in enumerate(cells, 1))
        return Snapshot(
            notebook.uri,
            to_fs_path(notebook.uri) or notebook.uri,
            notebook.version,
            tuple(uri for uri, _, _ in cells),
            tuple(v for _, v, _ in cells),
            program,
        )

    # ------------------------------------------------------------------ analysis
    def changed(self, notebook_uri: str, debounce: float) -> None:
        """The editor changed the notebook: analyse it at once, or after ``debounce`` in a burst of changes."""
        state = self.states.setdefault(notebook_uri, NotebookState())
        self.schedule(notebook_uri, state.clock.delay_for_change(debounce))

    def schedule(self, notebook_uri: str, delay: float) -> None:
        state = self.states.setdefault(notebook_uri, NotebookState())
        if state.pending is not None and not state.pending.done():
            state.pending.cancel()
        self.server.analysis_pool.changes.advance()
        state.clock.outstanding = True
        state.pending = asyncio.get_running_loop().create_task(self._analyse_later(notebook_uri, delay))

    async def _analyse_later(self, notebook_uri: str, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        snapshot = self.snapshot(notebook_uri)
        if snapshot is None:
            return
        settings = self.server.settings_for(snapshot.path)
        loop = asyncio.get_running_loop()
        try:
            analysis = await loop.run_in_executor(
                self.server.analysis_pool, engine.analyse, snapshot.program.text, snapshot.path, settings
            )
        except Exception as exc:  # a checker bug must not take the server down
            log.exception("analysis of %s failed", notebook_uri)
            self.server.window_log_message(
                types.LogMessageParams(types.MessageType.Error, f"offload-fixer: {notebook_uri}: {exc!r}")
            )
            return
        state = self.states.get(notebook_uri)
        current = self.snapshot(notebook_uri)
        if (
            state is None
            or current is None
            or current.version != snapshot.version
            or current.program.text != snapshot.program.text
        ):
            return  # the notebook changed meanwhile: its own analysis is on the way
        state.snapshot, state.analysis = snapshot, analysis
        self.publish(state, snapshot, analysis)

    def publish(self, state: NotebookState, snapshot: Snapshot, analysis: engine.Analysis) -> None:
        state.clock.outstanding = False
        by_cell: dict[str, list[types.Diagnostic]] = {uri: [] for uri in snapshot.cell_uris}
        for diagnostic, fixes in analysis.items():
            span = engine.primary_span(diagnostic)
            located = self._cell_range(snapshot, span)
            if located is None:
                continue
            uri, range_ = located
            by_cell[uri].append(self._to_lsp(snapshot, diagnostic, fixes, range_))
        for uri in set(state.published) - set(by_cell):  # cells deleted since: clear them
            by_cell.setdefault(uri, [])
        for uri, diagnostics in by_cell.items():
            version = dict(zip(snapshot.cell_uris, snapshot.cell_versions)).get(uri)
            self.server.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
            )
        state.published = {uri: d for uri, d in by_cell.items() if uri in snapshot.cell_uris}

    def _cell_range(self, snapshot: Snapshot, span: Span | None) -> tuple[str, types.Range] | None:
        """The cell a program span falls in and its range there."""
        if span is None or not snapshot.program.cells:
            return None
        cell, line = snapshot.program.locate(span.line)
        end_line = None
        if span.end_line is not None:
            end_cell, end_line = snapshot.program.locate(span.end_line)
            if end_cell is not cell:
                end_line = cell.line_count
        moved = Span(span.path, line, span.col, end_line, span.end_col)
        return snapshot.cell_uri(cell.number), span_range(moved, LineIndex.of(cell.source), self.server.encoding)

    def _to_lsp(
        self, snapshot: Snapshot, diagnostic: Diagnostic, fixes: tuple[FixChoice, ...], range_: types.Range
    ) -> types.Diagnostic:
        preferred = next((f for f in fixes if f.preferred), None)
        url = engine.rule_url(diagnostic.code)
        return types.Diagnostic(
            range=range_,
            message=message_of(diagnostic),
            severity=SEVERITY.get(diagnostic.severity, types.DiagnosticSeverity.Warning),
            code=diagnostic.code,
            code_description=types.CodeDescription(href=url) if url else None,
            source=NAME,
            related_information=self._related(snapshot, diagnostic) or None,
            data={
                "code": diagnostic.code,
                "title": engine.rule_title(diagnostic.code),
                "notebook": snapshot.uri,
                "version": snapshot.version,
                "applicability": preferred.safety if preferred else "none",
                "fixes": [f.to_data() for f in fixes],
                "diagnostic": diagnostic.to_dict() if fixes else None,
                "line": diagnostic.location.line if diagnostic.location else None,
            },
        )

    def _related(self, snapshot: Snapshot, diagnostic: Diagnostic) -> list[types.DiagnosticRelatedInformation]:
        found = []

        def add(span: Span | None, message: str) -> None:
            if span is None:
                return
            if engine.same_path(span.path, snapshot.path):
                located = self._cell_range(snapshot, span)
                if located is not None:
                    found.append(types.DiagnosticRelatedInformation(types.Location(*located), message))

        for span, message in engine.related_spans(diagnostic):
            add(span, message)
        return found

    def close(self, notebook_uri: str, cell_uris: list[str]) -> None:
        state = self.states.pop(notebook_uri, None)
        if state is not None and state.pending is not None:
            state.pending.cancel()
        path = to_fs_path(notebook_uri) or notebook_uri
        self.server.analysis_pool.submit(engine.forget, path)
        for uri in dict.fromkeys([*cell_uris, *(state.published if state else ())]):
            self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    # ------------------------------------------------------------------ code actions
    def code_actions(
        self, params: types.CodeActionParams, notebook: types.NotebookDocument, wanted: Any, fix_all_kind: str
    ) -> list[types.CodeAction]:
        state = self.states.get(notebook.uri)
        only = params.context.only
        actions: list[types.CodeAction] = []
        disabled_support = self.server.supports_disabled()
        if wanted(types.CodeActionKind.QuickFix, only):
            for diagnostic in params.context.diagnostics:
                data = diagnostic.data if isinstance(diagnostic.data, dict) else None
                if diagnostic.source != NAME or data is None or data.get("version") != notebook.version:
                    continue
                base = {"notebook": notebook.uri, "version": notebook.version}
                actions.extend(fix_actions(diagnostic, data, base, disabled_support))
                if data.get("line") is not None:
                    actions.append(
                        types.CodeAction(
                            title=f"offload-fixer: Suppress {data['code']} for this statement",
                            kind=types.CodeActionKind.QuickFix,
                            diagnostics=[diagnostic],
                            data={**base, "suppress": data["code"], "line": data["line"]},
                        )
                    )
            actions = one_per_fix(actions)
        safe = (
            state is not None
            and state.analysis is not None
            and any(f.safety == "safe" for _, fixes in state.analysis.items() for f in fixes)
        )
        if wanted(fix_all_kind, only) and (only or safe):
            actions.append(
                types.CodeAction(
                    title="offload-fixer: Fix all safe fixes",
                    kind=fix_all_kind,
                    data={"notebook": notebook.uri, "version": notebook.version, "fix_all": True},
                )
            )
        return actions

    async def resolve(self, action: types.CodeAction) -> types.CodeAction:
        """Fill in the edit of an action on a notebook: one versioned edit per changed cell;
        none when the notebook moved on since the action was offered."""
        data = action.data if isinstance(action.data, dict) else {}
        snapshot = self.snapshot(data["notebook"])
        if snapshot is None or snapshot.version != data.get("version"):
            return action
        text, path = snapshot.program.text, snapshot.path
        settings = self.server.settings_for(path)
        loop = asyncio.get_running_loop()
        pool = self.server.analysis_pool
        if data.get("fix_all"):
            new_text = await loop.run_in_executor(pool, engine.fix_all, text, path, settings)
        elif data.get("suppress"):
            new_text = await loop.run_in_executor(pool, engine.suppress, text, path, data["line"], data["suppress"])
        elif data.get("diagnostic"):
            diagnostic = Diagnostic.from_dict(data["diagnostic"])
            new_text = await loop.run_in_executor(
                pool,
                engine.apply_fix,
                text,
                path,
                diagnostic,
                data.get("requested") or data.get("strategy") or "auto",
                settings,
            )
        else:
            return action
        current = self.snapshot(data["notebook"])
        if new_text is None or new_text == text or current is None or current.version != snapshot.version:
            return action
        try:
            changed = snapshot.program.split(new_text)
        except CellSplitError as exc:
            log.warning("fix for %s not offered: %s", data["notebook"], exc)
            return action
        edits = []
        changes: dict[str, list[types.TextEdit]] = {}
        for number, source in sorted(changed.items()):
            old = snapshot.program.cell(number).source
            identifier = types.OptionalVersionedTextDocumentIdentifier(
                uri=snapshot.cell_uri(number), version=snapshot.cell_versions[number - 1]
            )
            cell_edits = minimal_edits(old, source, self.server.encoding)
            edits.append(types.TextDocumentEdit(identifier, cell_edits))
            changes[identifier.uri] = cell_edits
        if self.server.supports_document_changes():
            action.edit = types.WorkspaceEdit(document_changes=edits)
        else:
            action.edit = types.WorkspaceEdit(changes=changes)
        return action
