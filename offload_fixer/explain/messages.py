"""Find XLA's host-offloader errors in a log or a Python traceback and read what they name.

The messages come from ``host_offloader.cc`` and ``host_offload_legalize.cc``. Newer XLA
prefixes an error code (``E1200: CompileTimeHostOffloadOutputLocationMismatch:``) on the
line before the message and appends a link to the error page; older XLA prints the message
alone after the status (``INVALID_ARGUMENT:``). Both forms, and the ``--vmodule=host_offloader=1``
instruction trace, are read here with regular expressions over the log text only; the
message texts themselves are :mod:`offload_fixer.xla_messages`'s.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace
from typing import Literal

from offload_fixer import xla_messages as msg

Kind = str
"""The :attr:`~offload_fixer.xla_messages.XlaMessage.kind` of the message found."""

OUTPUT_NOT_HOST: Kind = msg.OUTPUT_NOT_HOST.kind


@dataclass(frozen=True)
class TraceStep:
    """One ``{Instr: NAME, ShapeIndex: {i,j}}`` line of XLA's instruction trace."""

    instruction: str
    shape_index: tuple[int, ...]


@dataclass(frozen=True)
class XlaError:
    """One host-offloader message found in a log."""

    kind: Kind
    code: int | None
    """XLA's error number: 1200 for the output error (printed as ``E1200`` by newer XLA)."""
    instruction: str | None
    """The HLO instruction the message names (``tuple.64``, ``multiply.11``)."""
    custom_call: bool
    """The message named the move to host itself (``(custom call "NAME")``): it is the root."""
    trace: tuple[TraceStep, ...]
    message: str
    """The message as logged: status, code line, text and link, joined on one line each."""
    line: int
    """1-based line of the log where the message starts."""
    error_name: str | None = None
    status: str | None = None
    url: str | None = None
    severity: Literal["error", "crash", "warning"] = "error"

    @property
    def diagnostic_code(self) -> str | None:
        return DIAGNOSTIC_CODES[self.kind]

    @property
    def trace_output_index(self) -> int | None:
        """The flat output the trace ends at: the first index of the last step's ShapeIndex."""
        if not self.trace:
            return None
        last = self.trace[-1].shape_index
        return last[0] if last else 0


DIAGNOSTIC_CODES: dict[str, str | None] = {message.kind: message.code for message in msg.HOST_OFFLOADER_MESSAGES}

_PATTERNS: tuple[tuple[Kind, str, re.Pattern[str]], ...] = tuple(
    (message.kind, message.severity, message.pattern()) for message in msg.HOST_OFFLOADER_MESSAGES
)

_CODE_LINE = re.compile(r"E(?P<code>\d{3,5}): (?P<error_name>[A-Za-z]\w*):\s*$")
_STATUS = re.compile(
    r"(?P<status>INVALID_ARGUMENT|INTERNAL|FAILED_PRECONDITION|UNIMPLEMENTED|UNKNOWN|RESOURCE_EXHAUSTED):\s*"
    r"(?:E(?P<code>\d{3,5}): (?P<error_name>[A-Za-z]\w*):\s*)?$"
)
_LINK = re.compile(r"See (?P<url>https?://\S+?/errors?/error_(?P<code>\d+))[^\n]*")
_TRACE_HEADER = re.compile(r"Instruction trace leading to error")
_TRACE_STEP = re.compile(r"\{Instr: (?P<name>" + msg.NAME + r"), ShapeIndex: \{(?P<index>[\d,\s]*)\}\}")


def parse_error_log(text: str) -> list[XlaError]:
    """Every distinct host-offloader message in ``text``, in log order.

    A traceback often repeats the message (the exception and its chained cause); repeats
    are dropped. An instruction trace is attached to the error-1200 message that follows it
    (XLA logs the trace just before it returns the error), or to the one before it.
    """
    starts = _line_starts(text)
    found: list[tuple[int, XlaError]] = []
    seen: set[tuple[str, str | None, bool]] = set()
    for kind, severity, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            name = msg.match_field(match, "name")
            custom = msg.match_field(match, "custom")
            instruction = custom or name
            key = (kind, instruction, custom is not None)
            if key in seen:
                continue
            seen.add(key)
            found.append(
                (
                    match.start(),
                    _build(
                        kind,
                        severity,
                        match,
                        instruction,
                        custom is not None,
                        text,
                        starts,
                    ),
                )
            )
    found.sort(key=lambda item: item[0])
    return _attach_traces(found, text)


def _build(
    kind: Kind,
    severity: str,
    match: re.Match[str],
    instruction: str | None,
    custom_call: bool,
    text: str,
    starts: list[int],
) -> XlaError:
    line_index = _line_of(starts, match.start())
    line_start = starts[line_index]
    prefix = text[line_start : match.start()]
    code = 1200 if kind == OUTPUT_NOT_HOST else None
    error_name = status = url = None
    pieces = [match.group(0).strip()]

    status_match = _STATUS.search(prefix)
    if status_match:
        status = status_match.group("status")
        if status_match.group("code"):
            code, error_name = (
                int(status_match.group("code")),
                status_match.group("error_name"),
            )
    if error_name is None and line_index > 0:
        previous = text[starts[line_index - 1] : line_start].rstrip("\n")
        code_match = _CODE_LINE.search(previous)
        if code_match:
            code, error_name = (
                int(code_match.group("code")),
                code_match.group("error_name"),
            )
            status_match = status_match or _STATUS.search(previous)
            status = status_match.group("status") if status_match else status
    if error_name:
        pieces.insert(0, f"E{code}: {error_name}:")
    if status:
        pieces.insert(0, f"{status}:")

    rest = text[match.end() : match.end() + 400]
    link = _LINK.match(rest.lstrip())
    if link:
        url = link.group("url")
        pieces.append(link.group(0))
        if code is None:
            code = int(link.group("code"))
    return XlaError(
        kind=kind,
        code=code,
        instruction=instruction,
        custom_call=custom_call,
        trace=(),
        message=" ".join(pieces),
        line=line_index + 1,
        error_name=error_name,
        status=status,
        url=url,
        severity=severity,  # type: ignore[arg-type]
    )


def _attach_traces(found: list[tuple[int, XlaError]], text: str) -> list[XlaError]:
    errors = [error for _, error in found]
    targets = [(offset, i) for i, (offset, error) in enumerate(found) if error.kind == OUTPUT_NOT_HOST]
    for header_at, steps in _traces(text):
        after = [i for offset, i in targets if offset >= header_at]
        before = [i for offset, i in targets if offset < header_at]
        index = after[0] if after else (before[-1] if before else None)
        if index is not None and not errors[index].trace:
            errors[index] = replace(errors[index], trace=steps)
    return errors


def _traces(text: str) -> list[tuple[int, tuple[TraceStep, ...]]]:
    """Each trace header and the steps on the lines that follow it (glog prefixes allowed)."""
    traces = []
    for header in _TRACE_HEADER.finditer(text):
        steps: list[TraceStep] = []
        position = header.end()
        for line in text[position:].splitlines():
            line_steps = [
                TraceStep(
                    m.group("name"),
                    tuple(int(i) for i in m.group("index").replace(" ", "").split(",") if i),
                )
                for m in _TRACE_STEP.finditer(line)
            ]
            if not line_steps:
                if steps or line.strip().rstrip(":"):
                    break
                continue
            steps.extend(line_steps)
        traces.append((header.start(), tuple(steps)))
    return traces


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(m.end() for m in re.finditer("\n", text))
    return starts


def _line_of(starts: list[int], offset: int) -> int:
    return bisect.bisect_right(starts, offset) - 1


# ---------------------------------------------------------------------------------------
# Python frames in a traceback: where the failing call was made
_FRAME = re.compile(
    r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)',
    re.MULTILINE,
)


@dataclass(frozen=True)
class TracebackFrame:
    path: str
    line: int
    function: str


def traceback_frames(text: str) -> list[TracebackFrame]:
    """The ``File "...", line N, in f`` frames of every traceback in the log, in order."""
    return [TracebackFrame(m.group("path"), int(m.group("line")), m.group("function")) for m in _FRAME.finditer(text)]
