"""``offload-fixer explain``: from an XLA host-offload error in a log to the user's source.

Without a dump the message itself is explained (what XLA checked, what the instruction name
means) with the commands that find the source. With an ``--xla_dump_to`` directory the
module that failed is found, the instruction is turned into the output it reaches, and the
analysis (``offload_fixer.analyze``) is run on that module so the diagnosis, spans and
fixes are the same as ``offload-fixer run`` gives.

Over 500 lines on purpose: the explanation and its rendering share one dump session and
match.
"""

from __future__ import annotations

import dataclasses
import os
import textwrap
from dataclasses import dataclass, field
from typing import Any, Literal

from offload_fixer import jax_compat
from offload_fixer import xla_messages as msg
from offload_fixer.explain.dump import (
    DumpedModule,
    DumpReadError,
    LoadedModule,
    OutputSlot,
    find_dumped_modules,
)
from offload_fixer.explain.messages import (
    OUTPUT_NOT_HOST,
    TracebackFrame,
    XlaError,
    parse_error_log,
    traceback_frames,
)
from offload_fixer.model import DEVICE, Diagnostic, Report, leaves_in_words, normalize_target
from offload_fixer.rules import get_rule

LocatedBy = Literal["trace", "instruction", "analysis"]


@dataclass(frozen=True)
class ErrorMatch:
    """One XLA error tied to the dumped module it came from and the analysis of that module."""

    error: XlaError
    module: DumpedModule
    source_kind: str
    """Which dump the analysis read: ``jax-ir``, ``xla-mlir``, ``hlo-text`` or ``hlo-proto``."""
    output_indices: tuple[int, ...]
    """The flat outputs the error points at (empty when neither could tell)."""
    entry_outputs: tuple[OutputSlot, ...]
    """Every flat output of the module: path, memory kind, the line that computed it."""
    diagnostics: tuple[Diagnostic, ...]
    """The analysis' diagnostics for this error, the one XLA reported first."""
    other_diagnostics: tuple[Diagnostic, ...]
    """Same code, other outputs: XLA stops at the first, the analysis finds them all."""
    report: Report
    located_by: LocatedBy

    @property
    def outputs(self) -> tuple[OutputSlot, ...]:
        return tuple(_slot(self.entry_outputs, index) for index in self.output_indices)


@dataclass(frozen=True)
class Explanation:
    errors: tuple[XlaError, ...]
    matches: tuple[ErrorMatch, ...]
    text: str
    target: str
    dump_dir: str | None = None
    notes: tuple[str, ...] = ()
    """Why a part of the dump could not be used, in words."""
    frames: tuple[TracebackFrame, ...] = field(default=(), repr=False)

    @property
    def reports(self) -> tuple[Report, ...]:
        """The analysis of each module an error was matched to, once per module."""
        seen: dict[str, Report] = {}
        for match in self.matches:
            seen.setdefault(match.module.label, match.report)
        return tuple(seen.values())

    @property
    def has_errors(self) -> bool:
        return any(error.severity != "warning" for error in self.errors)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--format json``: errors, matches (with their reports), text."""
        return dataclasses.asdict(self)


def explain(
    log_text: str,
    dump_dir: str | os.PathLike[str] | None = None,
    target: str = "tpu",
    confirm: bool = False,
    project: str | os.PathLike[str] | None = None,
) -> Explanation:
    """Explain every XLA host-offload message in ``log_text``; with ``dump_dir`` (an
    ``--xla_dump_to`` directory) also find the failing module, output and source lines.
    ``confirm``: the installed compiler of ``target`` also judges each module analysed.
    ``project``: the project root here, to which the traceback's paths of a log from another
    machine (a TPU VM's checkout) are mapped (:func:`local_path`)."""
    target = normalize_target(target)
    errors = tuple(parse_error_log(log_text))
    matches: list[ErrorMatch] = []
    notes: list[str] = []
    frames = tuple(traceback_frames(log_text))
    if project is not None:
        frames, mapped = _frames_here(frames, os.fspath(project))
        notes += [f"the log's {there} is {here} in this project" for there, here in mapped.items()]
    dump = os.fspath(dump_dir) if dump_dir is not None else None
    if dump is not None:
        session = _DumpSession(find_dumped_modules(dump), target, notes, confirm)
        if not session.modules:
            notes.append(
                f"{dump} holds no XLA or JAX module dump (*.before_optimizations.txt/.hlo.pb, module.mlir, jax_ir*.mlir)"
            )
        for error in errors:
            if error.severity == "warning":
                continue
            match = session.match(error)
            if match is not None:
                matches.append(match)
            elif session.modules:
                notes.append(f"no module in {dump} could be tied to: {error.message}")
    text = _render(errors, matches, frames, target, dump, notes)
    return Explanation(errors, tuple(matches), text, target, dump, tuple(notes), frames)


def local_path(path: str, project: str) -> str | None:
    """Where ``path`` (a file of a log from another machine, ``/home/u/run/train/step.py``) is
    in ``project``: the longest tail of it that is a file below the project root
    (``train/step.py``); ``None`` where no tail is, or where ``path`` is a file of the project
    already. A path under the project root that is no file here is mapped too: the other
    machine's checkout may sit at the same path (a copy of the project inside it, say)."""
    root = os.path.realpath(project)
    if os.path.realpath(path).startswith(root + os.sep) and os.path.isfile(path):
        return None
    parts = [part for part in path.replace("\\", "/").split("/") if part not in ("", ".")]
    for start in range(len(parts)):
        candidate = os.path.join(root, *parts[start:])
        if os.path.isfile(candidate):
            return candidate
    return None


def _frames_here(frames: tuple[TracebackFrame, ...], project: str) -> tuple[tuple[TracebackFrame, ...], dict[str, str]]:
    """The frames with the project's files of another machine mapped to this one, and what
    was mapped (shown as each path relative to the working directory)."""
    from offload_fixer.report import display_path

    mapped: dict[str, str] = {}
    here = []
    for frame in frames:
        found = None if _is_library_path(frame.path) else local_path(frame.path, project)
        if found is not None:
            mapped[frame.path] = display_path(found)
            frame = dataclasses.replace(frame, path=mapped[frame.path])
        here.append(frame)
    return tuple(here), mapped


# ---------------------------------------------------------------------------------------
class _DumpSession:
    """Loads, converts and analyses each dumped module at most once."""

    def __init__(self, modules: list[DumpedModule], target: str, notes: list[str], confirm: bool = False) -> None:
        self.confirm = confirm
        self.modules = modules
        self.target = target
        self.notes = notes
        self._loaded: dict[str, LoadedModule] = {}
        self._reports: dict[str, Report | None] = {}

    def candidates(self, error: XlaError) -> list[LoadedModule]:
        """Modules defining the named instruction first; a module XLA did not finish
        compiling before one it did; later compilations before earlier ones."""
        order = sorted(self.modules, key=_preference)
        loaded = [self.load(m) for m in order]
        if error.instruction is None:
            return loaded
        naming = [module for module in loaded if self._mentions(module, error.instruction)]
        return naming + [module for module in loaded if module not in naming]

    def load(self, dumped: DumpedModule) -> LoadedModule:
        if dumped.label not in self._loaded:
            self._loaded[dumped.label] = LoadedModule(dumped)
        return self._loaded[dumped.label]

    def report(self, module: LoadedModule) -> Report | None:
        label = module.dumped.label
        if label not in self._reports:
            from offload_fixer.analysis import analyze

            try:
                report = analyze(module.stablehlo, self.target)
                if self.confirm:
                    from offload_fixer.xla.confirm import confirm

                    report = confirm(report, module.stablehlo)
                self._reports[label] = report
            except (DumpReadError, ValueError) as exc:
                self.notes.append(f"{label}: cannot analyse ({exc})")
                self._reports[label] = None
        return self._reports[label]

    def _mentions(self, module: LoadedModule, instruction: str) -> bool:
        try:
            return module.mentions(instruction)
        except DumpReadError as exc:
            self.notes.append(f"{module.dumped.label}: {exc}")
            return False

    def match(self, error: XlaError) -> ErrorMatch | None:
        """The first candidate whose analysis has this error at the outputs the message
        points to; else the first module that names the instruction, undiagnosed."""
        fallback: ErrorMatch | None = None
        for module in self.candidates(error):
            named = error.instruction is not None and self._mentions(module, error.instruction)
            report = self.report(module)
            if report is None:
                continue
            try:
                indices, located_by = self._indices(module, error, named)
                module.outputs  # noqa: B018 - read here, where a broken file is a note
            except DumpReadError as exc:
                self.notes.append(f"{module.dumped.label}: {exc}")
                continue
            same_code = [d for d in report.diagnostics if d.code == error.diagnostic_code]
            if error.kind != OUTPUT_NOT_HOST:
                chosen, others = same_code, []
            elif located_by != "analysis":
                at_outputs = [d for d in same_code if d.output_index in indices]
                chosen, others = (
                    at_outputs[:1],
                    [d for d in same_code if d not in at_outputs[:1]],
                )
            else:
                chosen, others = same_code[:1], same_code[1:]
                indices = tuple(d.output_index for d in chosen if d.output_index is not None)
            match = ErrorMatch(
                error=error,
                module=module.dumped,
                source_kind=module.source_kind,
                output_indices=indices,
                entry_outputs=module.outputs,
                diagnostics=tuple(chosen),
                other_diagnostics=tuple(others),
                report=report,
                located_by=located_by,
            )
            if chosen:
                self._note_alternatives(match, error)
                return match
            if named and fallback is None:
                fallback = match
        return fallback

    def _note_alternatives(self, match: ErrorMatch, error: XlaError) -> None:
        """Several modules may define the same name (``tuple.1``); without a failed
        compilation to tell them apart, say which others could be meant."""
        if error.instruction is None or not match.module.compiled:
            return
        others = [
            m.dumped.label
            for m in self.candidates(error)
            if m.dumped != match.module
            and self._mentions(m, error.instruction)
            and self._indices(m, error, named=True) != ((), "instruction")
        ]
        if others:
            self.notes.append(
                f"{error.instruction} is also defined in {', '.join(others)}; "
                f"{match.module.label} was chosen as the latest module the analysis confirms"
            )

    def _indices(self, module: LoadedModule, error: XlaError, named: bool) -> tuple[tuple[int, ...], LocatedBy]:
        """The outputs the message points at in this module. An empty tuple located by the
        instruction means the name cannot start XLA's walk here: another module is meant."""
        if error.kind != OUTPUT_NOT_HOST:
            return (), "analysis"
        if error.trace_output_index is not None:
            return (error.trace_output_index,), "trace"
        if named and error.instruction is not None:
            try:
                fed = module.outputs_fed_by(error.instruction, error.custom_call)
            except DumpReadError as exc:
                self.notes.append(f"{module.dumped.label}: {exc}")
                fed = None
            if fed is not None:
                return tuple(i for i in fed if _slot(module.outputs, i).memory_kind == DEVICE), "instruction"
        return (), "analysis"


def _preference(module: DumpedModule) -> tuple[int, int]:
    """XLA modules that failed to compile, then compiled ones, then JAX-only dumps; the
    latest first within each."""
    if module.number is None:
        return (2, -(module.jax_number or 0))
    return (1 if module.compiled else 0, -module.number)


def _slot(slots: tuple[OutputSlot, ...], index: int) -> OutputSlot:
    for slot in slots:
        if slot.index == index:
            return slot
    return OutputSlot(index, None, DEVICE, None)


# ---------------------------------------------------------------------------------------
# Words
_MEANING: dict[msg.XlaMessage, str] = {
    msg.OUTPUT_NOT_HOST: (
        "A value that your program put in host memory (a jax.device_put to a host memory kind, an "
        "argument whose in_shardings say pinned_host, or a checkpoint offload policy) reaches an "
        "output of the jitted function whose memory kind is device. XLA does not move it back by "
        "itself: every released TPU and GPU compiler refuses to compile it. Either move the value back to "
        "device before it is returned, or declare that output as host memory in out_shardings."
    ),
    msg.DUS_NOT_BROADCAST: (
        "A scan that streams its per-step outputs to host writes them with a dynamic-update-slice "
        "into a stacked buffer; XLA can only place that buffer in host memory when it starts as a "
        "broadcast (the zeros JAX creates). Here the buffer comes from something else, so the "
        "move to host sits on the wrong side of the update."
    ),
    msg.WHILE_CONDITION_COMPUTE: (
        "A value in host memory is used by a compute instruction in a while loop's condition. "
        "XLA cannot run that condition on host memory. Move the value back to device before the "
        "loop, or keep host values out of the loop condition."
    ),
    msg.HOST_COMPUTE_DISABLED: (
        "A value in host memory is used by device compute, which XLA would normally turn into host "
        "compute, but --xla_disable_automatic_host_compute_offload is set. Move the value back "
        "to device before computing with it."
    ),
    msg.PURE_MEMORY_OFFLOAD: (
        "This XLA accepts no computation on a value in host memory: it may only be stored and "
        "moved back. Move the value back to device before computing with it."
    ),
    msg.MULTI_OPERAND_CHECK: (
        "XLA aborted (openxla/xla#34565): the first instruction that uses the value moved to host "
        "takes several operands (add, multiply, select...), which the offloader does not expect. "
        "Move the value back to device before using it in that computation."
    ),
}
"""What an XLA message means where the rule page of its code does not say it in these words."""


def _meaning(kind: str) -> str:
    message = msg.BY_KIND[kind]
    if message in _MEANING or message.code is None:
        return _MEANING[message]
    rule = get_rule(message.code)
    return f"{rule.why_bad} {rule.fixes[0].title}."


def _instruction_words(error: XlaError) -> str | None:
    name = error.instruction
    if name is None or error.kind != OUTPUT_NOT_HOST:
        return None
    if error.custom_call:
        return (
            f'"{name}" is the move to host itself (XLA names its custom call): the moved value is the '
            "output, with nothing in between."
        )
    if name.startswith("tuple"):
        return f'"{name}" is the tuple of outputs: the value moved to host goes straight into an output.'
    return (
        f'"{name}" is XLA\'s name for the first instruction that uses the host value (or for the host '
        "argument itself). XLA assigns such names after JAX hands over the program, so it is not in "
        "your source; a dump (--xla_dump_to) maps it back."
    )


def _render(
    errors: tuple[XlaError, ...],
    matches: list[ErrorMatch],
    frames: tuple[TracebackFrame, ...],
    target: str,
    dump: str | None,
    notes: list[str],
) -> str:
    if not errors:
        return (
            "No XLA host-offload message was found in the log. offload-fixer explain reads error 1200 "
            f'("{msg.OUTPUT_NOT_HOST.placeholder()}"), with or without its E1200 prefix, and the other '
            "host-offloader errors.\n"
        )
    lines: list[str] = []
    serious = [e for e in errors if e.severity != "warning"]
    warnings = [e for e in errors if e.severity == "warning"]
    by_error = {id(m.error): m for m in matches}
    user_frames = [f for f in frames if not _is_library_path(f.path)]
    for number, error in enumerate(serious, 1):
        lines.extend(_render_error(number, error, by_error.get(id(error)), target, dump is not None))
    if warnings:
        names = ", ".join(sorted({w.instruction for w in warnings if w.instruction}))
        lines.append(f"XLA also warned ({len(warnings)}): host compute on host-memory values ({names}).")
        lines.append("")
    if user_frames:
        call = user_frames[-1]
        lines.append(f"The failing call: {call.path}:{call.line} (in {call.function}).")
    if serious and (dump is None or not matches):
        lines.extend(_next_steps(user_frames, target, dump))
    for note in notes:
        lines.append(f"note: {note}")
    return "\n".join(lines).rstrip() + "\n"


def _render_error(number: int, error: XlaError, match: ErrorMatch | None, target: str, dumped: bool) -> list[str]:
    code = f"E{error.code}" if error.code is not None else "error"
    title = error.error_name or {"crash": "crash"}.get(error.severity, "host offload error")
    lines = [
        f"[{number}] XLA {code} {title} (log line {error.line})",
        f"    {error.message}",
        "",
    ]
    lines.append("    What it means:")
    lines.extend(_wrap(_meaning(error.kind), "      "))
    words = _instruction_words(error)
    if words:
        lines.extend(_wrap(words, "      "))
    if error.trace:
        steps = " -> ".join(f"{s.instruction}{{{','.join(map(str, s.shape_index))}}}" for s in error.trace)
        lines.append(f"      XLA's trace: {steps}")
        if error.trace_output_index is not None:
            lines.append(f"      The trace ends at flat output {error.trace_output_index}.")
    if match is not None:
        lines.append("")
        lines.extend(_render_match(match, target))
    elif dumped:
        lines.append("")
        lines.append("    The dump did not contain the module this error came from.")
    lines.append("")
    return lines


def _render_match(match: ErrorMatch, target: str) -> list[str]:
    source = {
        "jax-ir": "JAX's StableHLO dump",
        "xla-mlir": "XLA's copy of the StableHLO",
        "hlo-text": "the before_optimizations HLO",
        "hlo-proto": "the before_optimizations HLO proto",
    }[match.source_kind]
    lines = [f"    In the dump: {match.module.label} (read from {source})."]
    for slot in match.outputs:
        where = f", computed at {_span_text(slot.span)}" if slot.span else ""
        named = _output_name(slot, with_kind=True)
        lines.append(f"    {'Output ' + named if slot.path is not None else named.capitalize()}{where}.")
    if match.outputs:
        how = {
            "trace": "XLA's trace",
            "instruction": f"following {match.error.instruction} to the outputs",
        }
        lines.append(f"      (found by {how.get(match.located_by, 'the analysis')})")
    if not match.diagnostics:
        lines.append(
            f"    The analysis (target {target}) predicts no {match.error.diagnostic_code} in this module: the XLA "
            "that failed may differ from the model, or the dump is from another run."
        )
        return lines
    lines.append(f"    Diagnosis (offload-fixer analysis, target {target}):")
    for diagnostic in match.diagnostics:
        lines.extend(_render_diagnostic(diagnostic, match.entry_outputs))
    shown = {d.output_index for d in match.diagnostics}
    others = sorted({d.output_index for d in match.other_diagnostics if d.output_index is not None} - shown)
    if others:
        words = _outputs_in_words([_slot(match.entry_outputs, index) for index in others])
        lines.extend(_wrap(f"XLA stops at the first; the same problem also reaches {words}.", "    "))
    return lines


def _outputs_in_words(slots: list[OutputSlot]) -> str:
    """Several outputs, each once, in few words: by pytree path where the dump has them (more
    than two by what they share: ``9 outputs under [1][0] (.count, .mu, .nu)``), with their flat
    indices; by flat index alone where it has none."""
    flat = _ranges([slot.index for slot in slots])
    plural = "s" if len(slots) > 1 else ""
    if any(slot.path is None for slot in slots):
        return f"flat output{plural} {flat}"
    if len(slots) <= 2:
        return ", ".join(_output_name(slot) for slot in slots)
    paths = [slot.path or "" for slot in slots]
    return f"{leaves_in_words(paths, noun='outputs')} (flat outputs {flat})"


def _ranges(indexes: list[int]) -> str:
    """``0-3, 5, 7-12``: sorted flat indices, runs joined."""
    runs: list[list[int]] = []
    for index in sorted(indexes):
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def _render_diagnostic(diagnostic: Diagnostic, entry_outputs: tuple[OutputSlot, ...]) -> list[str]:
    lines = [f"      {diagnostic.code} {diagnostic.severity}: {diagnostic.message}"]
    if diagnostic.output_index is not None:
        lines.append(f"        output: {_output_name(_slot(entry_outputs, diagnostic.output_index))}")
    if diagnostic.origin is not None:
        where = f" at {_span_text(diagnostic.origin.span)}" if diagnostic.origin.span else ""
        lines.append(
            f"        host memory from: {diagnostic.origin.kind.replace('_', ' ')} ({diagnostic.origin.memory_kind}){where}"
        )
    elif diagnostic.span is not None:
        lines.append(f"        at {_span_text(diagnostic.span)}")
    if diagnostic.return_span is not None:
        lines.append(f"        returned at {_span_text(diagnostic.return_span)}")
    if diagnostic.confirmed is not None:
        lines.append(
            "        confirmed by the installed compiler"
            if diagnostic.confirmed
            else "        NOT confirmed by the installed compiler"
        )
    if diagnostic.explanation:
        lines.extend(_wrap(diagnostic.explanation, "        "))
    for fix in diagnostic.fixes:
        lines.append(f"        fix ({fix.safety}): {fix.title}")
    return lines


def _next_steps(user_frames: list[TracebackFrame], target: str, dump: str | None) -> list[str]:
    script = next((f.path for f in user_frames if f.function == "<module>"), "script.py")
    spelling = jax_compat.spelling()
    to_device = (
        f"jax.device_put(x, {spelling.memory_space.device})"
        if spelling.memory_space is not None
        else 'jax.device_put(x, sharding.with_memory_kind("device"))'
    )
    lines = [
        "",
        "Next:",
        f"  offload-fixer run --target {target} {script}",
        "      lowers your jitted functions for the accelerator on this machine, predicts this error",
        "      and shows the source lines and fixes.",
    ]
    if dump is None:
        lines += [
            "  or rerun once with a dump and explain again:",
            "      XLA_FLAGS=--xla_dump_to=/tmp/xla_dump JAX_DUMP_IR_TO=/tmp/xla_dump/jax python " + script,
            "      offload-fixer explain LOG --dump /tmp/xla_dump",
            "  XLA's own trace of the path: TF_CPP_VMODULE=host_offloader=1 TF_CPP_MIN_LOG_LEVEL=0",
        ]
    lines += [
        "The two fixes:",
        f"  move the value back to device before returning it: {to_device}",
        f'  or declare the output as host memory: an out_shardings leaf with memory_kind="{spelling.host_kind}".',
    ]
    return lines


def _output_name(slot: OutputSlot, with_kind: bool = False) -> str:
    """``[1]['mu'] (flat output 3)``; ``flat output 3`` when the module has no pytree paths."""
    name = f"flat output {slot.index}" if slot.path is None else slot.path or "(the whole result)"
    details = [] if slot.path is None else [f"flat output {slot.index}"]
    if with_kind:
        details.append(f"memory kind {slot.memory_kind}")
    return f"{name} ({', '.join(details)})" if details else name


def _span_text(span: Any) -> str:
    where = f"{span.path}:{span.line}:{span.col}"
    return f"{where} in {span.function}" if span.function else where


def _is_library_path(path: str) -> bool:
    return path.startswith("<") or any(
        part in path
        for part in (
            "site-packages",
            "dist-packages",
            f"{os.sep}jax{os.sep}",
            f"{os.sep}jaxlib{os.sep}",
        )
    )


def _wrap(text: str, indent: str, width: int = 96) -> list[str]:
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent)
