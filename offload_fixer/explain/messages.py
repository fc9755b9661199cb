"""Find XLA's host-offloader errors in a log or a Python traceback and read what they name.

The messages come from ``host_offloader.cc`` and ``host_offload_legalize.cc``. Newer XLA
prefixes an error code (``E1200: CompileTimeHostOffloadOutputLocationMismatch:``) on the
line before the message and appends a link to the error page; older XLA prints the message
alone after the status (``INVALID_ARGUMENT:``). Both forms, and the ``--vmodule=host_offloader=1``
instruction trace, are read here with regular expressions over the log text only.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace
from typing import Literal

Kind = Literal[
    "output-not-host",
    "dus-not-broadcast",
    "while-condition",
    "host-compute-disabled",
    "pure-memory-offload",
    "multi-operand-crash",
    "device-compute-on-host",
    "slice-on-host",
]

OUTPUT_NOT_HOST: Kind = "output-not-host"


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
    def diagnostic_code(self) -> str:
        return DIAGNOSTIC_CODES[self.kind]

    @property
    def trace_output_index(self) -> int | None:
        """The flat output the trace ends at: the first index of the last step's ShapeIndex."""
        if not self.trace:
            return None
        last = self.trace[-1].shape_index
        return last[0] if last else 0


DIAGNOSTIC_CODES: dict[str, str] = {
    "output-not-host": "OFL1200",
    "dus-not-broadcast": "OFL1202",
    "while-condition": "OFL1205",
    "host-compute-disabled": "OFL1201",
    "pure-memory-offload": "OFL1201",
    "multi-operand-crash": "OFL1203",
    "device-compute-on-host": "OFL1201",
    "slice-on-host": "OFL1206",
}

_NAME = r"[\w.\-]+"
_PATTERNS: tuple[tuple[Kind, str, re.Pattern[str]], ...] = (
    (
        "output-not-host",
        "error",
        re.compile(
            r"Tensor which is moved to host \((?:starting from (?P<name>" + _NAME + r")"
            r"|custom call \"(?P<custom>[^\"]+)\")\) is returned from the entry computation but the "
            r"layout for this output is not set to host memory\.?"
        ),
    ),
    (
        "dus-not-broadcast",
        "error",
        re.compile(
            r"DynamicUpdateSlice \"(?P<name>[^\"]+)\"'s first operand is not the result of a broadcast\.?"
        ),
    ),
    (
        "while-condition",
        "error",
        re.compile(
            r"Tensor which is moved to host is used by an invalid instruction "
            r"\(\"(?P<name>[^\"]+)\"\) during while condition body\.?"
        ),
    ),
    (
        "pure-memory-offload",
        "error",
        re.compile(
            r"Tensor which is moved to host(?: \(starting from "
            + _NAME
            + r"\))? is used by an instruction "
            r"\(\"(?P<name>[^\"]+)\"\) which is not acceptable during pure memory offload\.?"
        ),
    ),
    (
        "host-compute-disabled",
        "error",
        re.compile(r"Automatic host compute offloading is disabled[^\n]*"),
    ),
    (
        "multi-operand-crash",
        "crash",
        re.compile(
            r"Expecting instruction (?P<name>"
            + _NAME
            + r") to have 1 operand, but it has \d+\.?"
        ),
    ),
    (
        "device-compute-on-host",
        "warning",
        re.compile(
            r"Found an instruction \(\"(?P<name>[^\"]+)\"\) which does device compute in host memory "
            r"space\.[^\n]*"
        ),
    ),
    (
        "slice-on-host",
        "warning",
        re.compile(
            r"Encountered (?:slice|dynamic-slice|dynamic_slice) on tensor which is in host memory\. "
            r"(?P<name>" + _NAME + r") does not move the tensor back to device\.[^\n]*"
        ),
    ),
)

_CODE_LINE = re.compile(r"E(?P<code>\d{3,5}): (?P<error_name>[A-Za-z]\w*):\s*$")
_STATUS = re.compile(
    r"(?P<status>INVALID_ARGUMENT|INTERNAL|FAILED_PRECONDITION|UNIMPLEMENTED|UNKNOWN|RESOURCE_EXHAUSTED):\s*"
    r"(?:E(?P<code>\d{3,5}): (?P<error_name>[A-Za-z]\w*):\s*)?$"
)
_LINK = re.compile(r"See (?P<url>https?://\S+?/errors?/error_(?P<code>\d+))[^\n]*")
_QUOTED = re.compile(r"\"(?P<name>[^\"]+)\"")
_TRACE_HEADER = re.compile(r"Instruction trace leading to error")
_TRACE_STEP = re.compile(
    r"\{Instr: (?P<name>" + _NAME + r"), ShapeIndex: \{(?P<index>[\d,\s]*)\}\}"
)


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
            if "name" in pattern.groupindex:
                name = match.group("name")
            else:
                quoted = _QUOTED.search(match.group(0))
                name = quoted.group("name") if quoted else None
            custom = match.groupdict().get("custom")
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
    targets = [
        (offset, i)
        for i, (offset, error) in enumerate(found)
        if error.kind == OUTPUT_NOT_HOST
    ]
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
                    tuple(
                        int(i)
                        for i in m.group("index").replace(" ", "").split(",")
                        if i
                    ),
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
    return [
        TracebackFrame(m.group("path"), int(m.group("line")), m.group("function"))
        for m in _FRAME.finditer(text)
    ]
