"""``%load_ext offload_fixer``: the kernel's jit compilations checked as ``offload-fixer run`` does.

Loading the extension routes ``jax.jit`` through the runner's interception
(:func:`offload_fixer.runner.intercept_jit` with a :class:`~offload_fixer.runner.CompilationChecker`,
the same objects ``run`` uses): from then on each new compilation is lowered for the target
and analysed after the user's own call has run, so nothing the cell computes changes. After
each cell, the findings its compilations produced are shown under it (IPython display
output), with their lines in the cells (``In [3]:12:5``; a cell's file name maps back to its
execution count) and the fix as a diff. ``%offload_fix`` puts the fixed cell into the cell it
runs in (IPython's ``set_next_input(..., replace=True)``, as ``%load`` does) for the user to
run.

Fixes are planned on the kernel's history as one program (its cells in execution order,
:class:`~offload_fixer.notebook.program.Program`), so a fix that belongs in another cell than
the one that compiled -- the ``def`` in one, the ``jax.jit(..., in_shardings=...)`` in
another -- lands there. jit objects made before the extension was loaded are not seen (load
it first); the rest of ``run``'s limits apply (``offload_fixer/runner.py``).

Over 500 lines on purpose: the magics share one kernel's history, settings and findings
view.
"""

from __future__ import annotations

import argparse
import dataclasses
import html
import os
import shlex
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from offload_fixer.model import STRATEGIES, Diagnostic, FunctionRef, Span

from .program import CellSplitError, Program

KERNEL_CELLS = "<ipython cells>"
"""The path the kernel's history is planned and fixed under, as one program."""


class UsageError(ValueError):
    """A magic's arguments or a setting that cannot be used; shown as one line."""


@dataclass(frozen=True)
class ExtensionSettings:
    """What the extension checks for and how it fixes; ``[tool.offload-fixer]`` of the kernel's
    working directory, then ``%offload_fixer`` options."""

    target: str = "tpu"
    strategy: str = "auto"
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    confirm: bool = False
    """Compile each finding with the real compiler before showing it (``--confirm``)."""

    @classmethod
    def from_project(cls, directory: str) -> ExtensionSettings:
        from offload_fixer.config import ConfigError, SettingsResolver

        try:
            settings = SettingsResolver().settings_for(directory)
        except ConfigError as exc:
            raise UsageError(str(exc)) from exc
        return cls(settings.target, settings.strategy, settings.selected, settings.ignore)


@dataclass
class CellFindings:
    """What one cell's compilations produced, in the coordinates of the cells' file names."""

    execution_count: int | None
    diagnostics: list[Diagnostic]
    warnings: list[str] = field(default_factory=list)
    reports: list[Any] = field(default_factory=list)
    """The compilations' reports, for their output trees (host-output fixes mirror them)."""


@dataclass(frozen=True)
class FixResult:
    """The fixed source of each cell a fix edits (by execution count), diffs of files, and why
    some fixes were not made."""

    cells: dict[int, str]
    file_diffs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    marks: Mapping[Diagnostic, Any] = field(default_factory=dict)
    """What ``%offload_fix`` does about each finding (by its diagnostic in the cells' file
    names), as the verification stage decided it: the ``[*]`` of the findings shown."""


class OffloadFixerExtension:
    """The state the extension keeps in one kernel."""

    def __init__(self, shell: Any, settings: ExtensionSettings) -> None:
        self.shell = shell
        self.settings = settings
        self.latest: CellFindings | None = None
        """The findings last shown: what ``%offload_fix`` fixes."""
        self._stack: ExitStack | None = None
        self._checker: Any = None
        self._seen_reports = 0
        self._seen_warnings = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._activate(self.settings)

    def stop(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None

    def reconfigure(self, settings: ExtensionSettings) -> None:
        """New settings; a new target checks every compilation again, under a new checker.
        Settings that cannot be used change nothing."""
        if settings.target != self.settings.target or settings.confirm != self.settings.confirm:
            self._activate(settings)
        else:
            self.settings = settings

    def _activate(self, settings: ExtensionSettings) -> None:
        """Check compilations under ``settings`` from now on; raises before anything changes."""
        from offload_fixer import jax_compat
        from offload_fixer.jax_compat import tracing as jax_tracing
        from offload_fixer.runner import CompilationChecker, intercept_jit

        try:
            jax_compat.check_runtime_supported()
        except jax_compat.UnsupportedJaxVersion as exc:
            raise UsageError(str(exc)) from exc
        jax_tracing.start_quietly()  # no TPU probe where there is none, no plugin noise under the cells
        checker = _compilation_checker(CompilationChecker, settings)
        self.stop()  # the interception patches jax.jit: never twice at once
        self._stack = ExitStack()
        self._stack.enter_context(intercept_jit(checker))
        self._checker, self.settings = checker, settings
        self._seen_reports = self._seen_warnings = 0

    # ------------------------------------------------------------------ events
    def after_cell(self, result: Any) -> None:
        """``post_run_cell``: show what this cell's compilations found, under it."""
        if self._checker is None:
            return
        run = self._checker.result
        reports, warnings = run.reports[self._seen_reports :], run.tool_warnings[self._seen_warnings :]
        self._seen_reports, self._seen_warnings = len(run.reports), len(run.tool_warnings)
        diagnostics = self._reportable([d for report in reports for d in report.diagnostics])
        from IPython.display import display

        if not diagnostics and not warnings:
            if reports:  # checked, and clean: said, so a checked cell does not look unchecked
                checked = (
                    f"{len(reports)} compilation{'s' if len(reports) != 1 else ''} checked for {self.settings.target}"
                )
                display(FindingsView(f"All checks passed! ({checked})", (), (), (), False))
            return
        findings = CellFindings(getattr(result, "execution_count", None), diagnostics, list(warnings), list(reports))
        if diagnostics:
            self.latest = findings
        try:
            view = self.view(findings)
        except Exception as exc:  # noqa: BLE001 - the tool must never break the user's cell
            view = FindingsView(
                "", [f"offload-fixer: could not show what it found: {type(exc).__name__}: {exc}"], (), (), False
            )
        display(view)

    def _reportable(self, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
        """Selected codes, less what a suppression comment in the cell silences."""
        from offload_fixer.config import select_codes
        from offload_fixer.source.lookup import source_bytes
        from offload_fixer.suppression import filter_suppressed

        selected = select_codes(diagnostics, self.settings.select, self.settings.ignore)
        sources = {}
        for d in selected:
            for span in (d.span, d.origin.span if d.origin else None, d.return_span):
                if span is not None and span.path not in sources:
                    data = source_bytes(span.path)
                    if data is not None:
                        sources[span.path] = data.decode("utf-8", "replace")
        return list(filter_suppressed(selected, sources)[0])

    # ------------------------------------------------------------------ showing
    def view(self, findings: CellFindings) -> FindingsView:
        from offload_fixer.report import format_text, output_trees

        names = cell_names(self.shell)
        shown = [_labelled(d, names) for d in findings.diagnostics]
        fix = self.fixes(findings) if findings.diagnostics else FixResult({})
        trees = output_trees(findings.reports)
        text = format_text(
            shown,
            root=os.getcwd(),
            marks={label: fix.marks[d] for d, label in zip(findings.diagnostics, shown) if d in fix.marks},
            # the functions as the findings name them, in the cells that ran them
            trees={moved: paths for function, paths in trees.items() if (moved := _function(function, names, None))},
        )
        warnings = [f"offload-fixer: could not check a compilation: {w}" for w in findings.warnings]
        diffs = [
            _cell_diff(number, _history_source(self.shell, number), source)
            for number, source in sorted(fix.cells.items())
        ]
        return FindingsView(text, warnings, diffs + list(fix.file_diffs), list(fix.notes), bool(fix.cells))

    # ------------------------------------------------------------------ fixing
    def fixes(self, findings: CellFindings, unsafe: bool = False) -> FixResult:
        """Plan the findings' fixes on the kernel's cells as one program, verify them as ``run``
        does (each fixed function rebuilt in a copy of the kernel's namespace and lowered with the
        recorded call, compiled where the compiler is installed) and apply those that hold there
        (safe ones; unsafe ones too with ``unsafe``); files outside the cells get a diff. The
        marks say what was done about each finding, titled with the cell and line each edit goes
        to (``In [5], line 3``)."""
        from offload_fixer.findings import fix_marks, verified_marks
        from offload_fixer.fixes import apply_plans, plan_fixes
        from offload_fixer.fixes.apply import choose_plans
        from offload_fixer.fixes.candidates import candidate_plans
        from offload_fixer.verify.stage import Verifier

        program, names = kernel_program(self.shell)
        diagnostics, reports, calls = self._in_program(findings, program, names)

        def place(line: int) -> str:
            cell, in_cell = program.locate(line)
            return f"In [{cell.number}], line {in_cell}"

        texts = {KERNEL_CELLS: program.data}
        strategy = self.settings.strategy
        plans = plan_fixes(diagnostics, strategy=strategy, texts=texts, reports=reports, places={KERNEL_CELLS: place})
        chosen, skipped = choose_plans(plans, unsafe)
        notes = [
            f"not applied ({plan.title}): {why}" + (" (--unsafe applies it)" if why.startswith("unsafe") else "")
            for plan, why in skipped
        ]
        in_cells = [p for p in chosen if p.path == KERNEL_CELLS]
        in_files = [p for p in chosen if p.path != KERNEL_CELLS]
        file_diffs = tuple(r.diff for r in apply_plans(in_files, write=False) if r.diff)
        cells: dict[int, str] = {}
        results = []
        if in_cells:
            verifier = Verifier(
                reports, calls, self.settings.target, figures=False, parts=tuple(names), texts=texts, strategy=strategy
            )
            alternatives = candidate_plans(
                diagnostics,
                strategy,
                reports=reports,
                texts=texts,
                eligible=lambda plan: bool(choose_plans([plan], unsafe)[0]),
            )
            result, _ = verifier.choose_file(KERNEL_CELLS, in_cells, unsafe, alternatives)
            results.append(result)
            notes += verifier.notes
            if result.error is not None:
                notes.append(f"the fix could not be made in the cells: {result.error}")
            elif result.changed:
                try:
                    cells = program.split(result.new_text)
                except CellSplitError as exc:
                    notes.append(f"the fix could not be made in the cells: {exc}")
        marks = verified_marks(diagnostics, fix_marks(diagnostics, plans, unsafe), results, bool(in_cells))
        moved = {d: marks[m] for d, m in zip(findings.diagnostics, diagnostics) if m in marks}
        return FixResult(cells, file_diffs, tuple(notes), moved)

    def _in_program(
        self, findings: CellFindings, program: Program, names: Mapping[str, int]
    ) -> tuple[list[Diagnostic], list[Any], dict[int, Any]]:
        """The findings, their reports (holding them, for the output trees) and the calls their
        compilations were checked with, moved into the kernel's program."""
        diagnostics, pairs = _findings_in_program(findings, program, names)
        recorded = self._checker.result if self._checker is not None else None
        positions = {id(r): i for i, r in enumerate(recorded.reports)} if recorded is not None else {}
        calls: dict[int, Any] = {}
        for index, (original, _) in enumerate(pairs):
            position = positions.get(id(original))
            if recorded is not None and position is not None and position in recorded.calls:
                calls[index] = recorded.calls[position]
        return diagnostics, [moved for _, moved in pairs], calls

    def fix(self, argument: str) -> str:
        """``%offload_fix [N] [--unsafe]``: put the fixed In [N] (the only cell the fix edits,
        when N is left out) into the current cell; returns what to tell the user."""
        parser = _ArgumentParser(prog="%offload_fix", add_help=False)
        parser.add_argument("cell", nargs="?", type=int)
        parser.add_argument("--unsafe", action="store_true")
        options = parser.parse(argument)
        if self.latest is None:
            return "offload-fixer: no finding to fix (the findings of the last cell that had some are fixed)"
        result = self.fixes(self.latest, unsafe=options.unsafe)
        lines = list(result.notes)
        if not result.cells:
            lines.insert(0, "offload-fixer: no fix can be made in the cells")
            return "\n".join(lines + list(result.file_diffs))
        number = options.cell
        if number is None:
            if len(result.cells) > 1:
                names = ", ".join(f"In [{n}]" for n in sorted(result.cells))
                return f"offload-fixer: the fix edits {names}: run %offload_fix N for each (N: the cell's number)"
            (number,) = result.cells
        if number not in result.cells:
            return f"offload-fixer: the fix does not edit In [{number}]; it edits " + ", ".join(
                f"In [{n}]" for n in sorted(result.cells)
            )
        self.shell.set_next_input(result.cells[number], replace=True)
        lines.insert(
            0,
            f"offload-fixer: this cell now holds In [{number}] with the fix: run it, then the cells "
            "that call the fixed function",
        )
        return "\n".join(lines)

    def configure(self, argument: str) -> str:
        """``%offload_fixer [--target T] [--strategy S] [--select C] [--ignore C] [--confirm]``."""
        from offload_fixer.model import TARGETS

        parser = _ArgumentParser(prog="%offload_fixer", add_help=False)
        parser.add_argument("--target", choices=TARGETS)
        parser.add_argument("--strategy", choices=STRATEGIES)
        parser.add_argument("--select")
        parser.add_argument("--ignore")
        parser.add_argument("--confirm", action=argparse.BooleanOptionalAction, default=None)
        options = parser.parse(argument)
        changes = {key: value for key, value in vars(options).items() if value is not None}
        for key in ("select", "ignore"):
            if key in changes:
                changes[key] = tuple(code.strip() for code in changes[key].split(",") if code.strip())
        self.reconfigure(dataclasses.replace(self.settings, **changes))
        s = self.settings
        return (
            f"offload-fixer: checking new jit compilations for {s.target} (strategy {s.strategy}"
            f"{', confirmed by the compiler' if s.confirm else ''})"
        )


def _compilation_checker(factory: Any, settings: ExtensionSettings) -> Any:
    """The runner's checker for these settings: the one place ``run``'s options reach it."""
    if settings.confirm:
        raise UsageError(
            "--confirm (each finding compiled with the real compiler) is not available in the kernel extension yet"
        )
    return factory(settings.target)


class _ArgumentParser(argparse.ArgumentParser):
    def parse(self, line: str) -> argparse.Namespace:
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"{self.prog}: {exc}") from exc
        return self.parse_args(words)

    def error(self, message: str):  # argparse would exit the kernel's process
        raise UsageError(f"{self.prog}: {message}")


# ---------------------------------------------------------------------------------------
# Cells of the kernel
def cell_names(shell: Any) -> dict[str, int]:
    """Each cell's compiled file name -> its execution count (IPython keeps this map to show
    ``Cell In[3]`` in tracebacks; ipykernel's names are ``/tmp/ipykernel_<pid>/<hash>.py``)."""
    return dict(getattr(shell.compile, "_filename_map", {}))


def kernel_program(shell: Any) -> tuple[Program, dict[str, int]]:
    """The cells run so far, in execution order, as one program; and the cell file names."""
    names = cell_names(shell)
    history = shell.history_manager.input_hist_raw
    numbers = sorted({n for n in names.values() if isinstance(n, int) and 0 < n < len(history)})
    return Program((n, history[n]) for n in numbers), names


def _history_source(shell: Any, number: int) -> str:
    return shell.history_manager.input_hist_raw[number]


def _moved(span: Span | None, names: Mapping[str, int], program: Program | None) -> Span | None:
    """A span in a cell's file: as a program line (``program``), else labelled ``In [N]``."""
    if span is None or span.path not in names:
        return span
    number = names[span.path]
    if program is None:
        return dataclasses.replace(span, path=f"In [{number}]")
    first = program.program_line(number, 1) - 1
    end_line = span.end_line + first if span.end_line is not None else None
    return dataclasses.replace(span, path=KERNEL_CELLS, line=span.line + first, end_line=end_line)


def _function(function: FunctionRef | None, names: Mapping[str, int], program: Program | None) -> FunctionRef | None:
    if function is None or function.path is None or function.path not in names or function.line is None:
        return function
    moved = _moved(Span(function.path, function.line), names, program)
    assert moved is not None, "a span moves to a span"
    return dataclasses.replace(function, path=moved.path, line=moved.line)


def _remapped(diagnostic: Diagnostic, names: Mapping[str, int], program: Program | None) -> Diagnostic:
    origin = diagnostic.origin
    if origin is not None:
        origin = dataclasses.replace(origin, span=_moved(origin.span, names, program))
    return dataclasses.replace(
        diagnostic,
        span=_moved(diagnostic.span, names, program),
        return_span=_moved(diagnostic.return_span, names, program),
        origin=origin,
        trace=tuple(dataclasses.replace(step, span=_moved(step.span, names, program)) for step in diagnostic.trace),
        function=_function(diagnostic.function, names, program),
        source_sha256=None,
    )


def _labelled(diagnostic: Diagnostic, names: Mapping[str, int]) -> Diagnostic:
    """For display: every span in a cell named ``In [N]``, lines as in that cell."""
    return _remapped(diagnostic, names, None)


def _in_program(diagnostic: Diagnostic, program: Program, names: Mapping[str, int]) -> Diagnostic:
    """For fixing: every span in a cell moved into the kernel's program."""
    return _remapped(diagnostic, {k: v for k, v in names.items() if _in(program, v)}, program)


def _findings_in_program(
    findings: CellFindings, program: Program, names: Mapping[str, int]
) -> tuple[list[Diagnostic], list[tuple[Any, Any]]]:
    """The findings and their reports (holding them, for the output trees; their functions
    too) moved into the kernel's program, each report beside the one it was moved from."""
    diagnostics = [_in_program(d, program, names) for d in findings.diagnostics]
    moved = dict(zip(findings.diagnostics, diagnostics))
    cells = {k: v for k, v in names.items() if _in(program, v)}
    reports = [
        (
            r,
            dataclasses.replace(
                r,
                diagnostics=tuple(moved[d] for d in r.diagnostics if d in moved),
                function=_function(r.function, cells, program),
            ),
        )
        for r in findings.reports
    ]
    return diagnostics, [(r, m) for r, m in reports if m.diagnostics]


def _in(program: Program, number: int) -> bool:
    try:
        program.cell(number)
    except KeyError:
        return False
    return True


def _cell_diff(number: int, old: str, new: str) -> str:
    from offload_fixer.source.diffs import unified_diff

    return unified_diff(f"In [{number}]", old, new)


# ---------------------------------------------------------------------------------------
# Display
@dataclass(frozen=True)
class FindingsView:
    """What is shown under a cell: the findings as ``offload-fixer run`` prints them, the
    fix as a diff, and how to apply it."""

    text: str
    warnings: Sequence[str]
    diffs: Sequence[str]
    notes: Sequence[str]
    fixable: bool

    def _parts(self) -> list[tuple[str, str]]:
        parts = [("findings", self.text.rstrip("\n"))] if self.text else []
        parts += [("warning", w) for w in self.warnings]
        if self.diffs:
            how = (
                "%offload_fix puts the fixed cell into the cell it runs in" if self.fixable else "apply it in the file"
            )
            parts.append(("note", f"Fix ({how}):"))
            parts += [("diff", d.rstrip("\n")) for d in self.diffs]
        parts += [("note", n) for n in self.notes]
        return parts

    def __repr__(self) -> str:
        return "\n".join(text for _, text in self._parts())

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def _repr_html_(self) -> str:
        colours = {"+": "#116329", "-": "#82071e", "@": "#0550ae"}
        out = []
        for kind, text in self._parts():
            if kind == "diff":
                lines = []
                for line in text.splitlines():
                    colour = None if line.startswith(("+++", "---")) else colours.get(line[:1])
                    escaped = html.escape(line)
                    lines.append(f'<span style="color:{colour}">{escaped}</span>' if colour else escaped)
                out.append("<pre>" + "\n".join(lines) + "</pre>")
            else:
                out.append(f"<pre>{html.escape(text)}</pre>")
        return '<div class="offload-fixer">' + "".join(out) + "</div>"


# ---------------------------------------------------------------------------------------
# IPython's entry points
_LOADED: dict[int, OffloadFixerExtension] = {}


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext offload_fixer``."""
    from IPython.core.error import UsageError as IPythonUsageError

    if id(shell) in _LOADED:
        return
    try:
        extension = OffloadFixerExtension(shell, ExtensionSettings.from_project(os.getcwd()))
        extension.start()
    except UsageError as exc:
        raise IPythonUsageError(f"offload-fixer: {exc}") from None
    _LOADED[id(shell)] = extension
    shell.events.register("post_run_cell", extension.after_cell)

    def offload_fix(line: str) -> None:
        try:
            print(extension.fix(line))
        except UsageError as exc:
            raise IPythonUsageError(str(exc)) from None

    def offload_fixer(line: str) -> None:
        try:
            print(extension.configure(line))
        except UsageError as exc:
            raise IPythonUsageError(str(exc)) from None

    shell.register_magic_function(offload_fix, "line", "offload_fix")
    shell.register_magic_function(offload_fixer, "line", "offload_fixer")
    print(f"offload-fixer: checking new jit compilations for {extension.settings.target}")


def unload_ipython_extension(shell: Any) -> None:
    """``%unload_ext offload_fixer``: ``jax.jit`` is JAX's own again."""
    extension = _LOADED.pop(id(shell), None)
    if extension is None:
        return
    shell.events.unregister("post_run_cell", extension.after_cell)
    extension.stop()
