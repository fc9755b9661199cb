"""XLA's host offloader's message texts, each written once: what the compilers print, with the
names left open, and the :class:`XlaMessage` every XLA text is written as.

A backend failure's texts (what libtpu or XLA:GPU says when it cannot build what the host
offloader decided) are declared in the rule module of their code, beside the pattern that
predicts them (:func:`offload_fixer.rules.xla_texts` gathers them). The analysis fills them in with XLA's names for the user's module (so a finding can be found
in a TPU log with grep), the rule pages quote them, and ``explain`` and the oracle read logs
and errors for them through :func:`pattern`. The texts are those of the released compilers
(libtpu 0.0.42.1 / 0.0.50.1, jax-cuda12-plugin 0.10.2 / 0.12.0.1); where another version
words one differently, the variant that ``explain`` also reads is written beside it.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Literal

from offload_fixer import codes

Severity = Literal["error", "crash", "warning"]
NAME = r"[\w.\-]+"
FIELDS = {
    "name": r'[^"\s)]+',
    "start": NAME,
    "custom": r'[^"]+',
    "opcode": r"[\w\-]+",
    "index": r"[\d,\s]*",
    "count": r"\d+",
}
"""What each template field matches in a log."""


@dataclass(frozen=True)
class XlaMessage:
    kind: str
    """What happened, in one word-group: the key ``explain`` and the oracle report."""
    template: str
    """``str.format`` template: ``{name}`` an instruction or parameter, ``{opcode}``, ``{index}``."""
    code: str | None
    """The diagnostic code this message corresponds to, ``None`` for none."""
    severity: Severity = "error"
    """``error``: the compile fails with it; ``crash``: the compiler aborts; ``warning``: logged."""
    status: str = "INVALID_ARGUMENT"
    """How the status line starts when the compile fails with it; empty for a log line."""
    stable: str | None = None
    """The part of the template every version prints alike, when the rest varies."""
    variants: tuple[str, ...] = ()
    """Other wordings of the same message (older or newer XLA) that ``explain`` also reads."""

    def format(self, **fields: object) -> str:
        return self.template.format(**fields)

    def placeholder(self) -> str:
        """The text with its fields shown as placeholders, for documentation."""
        return self.template.format(name="NAME", opcode="OPCODE", index="INDEX")

    def pattern(self) -> re.Pattern[str]:
        """A regular expression for the message in a log, with a ``name`` (or ``custom``)
        group for the instruction it names; the wording after :attr:`stable` may vary."""
        texts = [self.stable or self.template, *self.variants]
        return re.compile("|".join(_regex(text, f"v{i}") for i, text in enumerate(texts)))


def _regex(template: str, prefix: str) -> str:
    """``template`` with literal text escaped and each field a group (named once, then a
    back-reference), so one pattern per wording can sit in an alternation."""
    out: list[str] = []
    seen: set[str] = set()
    for literal, field, _, _ in _FORMATTER.parse(template):
        out.append(re.escape(literal))
        if field is None:
            continue
        group = f"{prefix}_{field}"
        if field in seen:
            out.append(f"(?P={group})")
            continue
        seen.add(field)
        value = FIELDS[field]
        out.append(f"(?P<{group}>{value})")
    return "(?:" + "".join(out) + r")[^\n]*"


_PREFIX_ONLY = re.compile(r"^[A-Z_]+:\s*(E\d+: \w+:)?\s*$")


def summary(message: str, limit: int = 300) -> str:
    """The line of a compiler's error that says what went wrong, in the compiler's own form:
    its status and error code (``INVALID_ARGUMENT: E1200:
    CompileTimeHostOffloadOutputLocationMismatch:``, as the TPU and newer XLA print it), the
    text, and the link to the error's page where the message has one; never the status line
    alone, the HLO text of the instruction, nor XLA's "Suspected Python Code Location" frames."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    status = ""
    link = next((line for line in lines if line.startswith(LINK_PREFIX)), "")
    for line in lines:
        if _PREFIX_ONLY.match(line):
            status = status or line + " "
            continue
        if line.startswith(("Suspected Python Code Location", LINK_PREFIX)) or "[<module>]" in line:
            break
        text = line if ":" in line[:40] else status + line
        text = text.split(_INSTRUCTION_DUMP, 1)[0].rstrip(": ")
        text = text if len(text) <= limit else text[: limit - 3] + "..."
        return f"{text} {link}" if link and link not in text else text
    return lines[0] if lines else ""


_INSTRUCTION_DUMP = ": %"
"""Where XLA appends the HLO text of the instruction it failed on (``...: %dynamic-slice.1 =
f32[5,1]{...} dynamic-slice(...), backend_config={...}``), which the summary leaves out."""
LINK_PREFIX = "See https://"
"""How XLA's link to an error's page starts (``See https://openxla.org/xla/errors/error_1200
for more details.``)."""


def match_field(match: re.Match[str], field: str) -> str | None:
    """The value of ``field`` in whichever wording of a message matched."""
    for group, value in match.groupdict().items():
        if group.split("_", 1)[1] == field and value is not None:
            return value
    return None


_FORMATTER = string.Formatter()


OUTPUT_NOT_HOST = XlaMessage(
    "output-not-host",
    "Tensor which is moved to host (starting from {name}) is returned from the entry computation "
    "but the layout for this output is not set to host memory.",
    codes.HOST_VALUE_DEVICE_OUTPUT,
    variants=(
        'Tensor which is moved to host (custom call "{custom}") is returned from the entry computation '
        "but the layout for this output is not set to host memory.",
    ),
)
HOST_COMPUTE = XlaMessage(
    "device-compute-on-host",
    'Found an instruction ("{name}") which does device compute in host memory space. Converting '
    "into host compute. This is likely to have a very slow execution time. If you're using JAX, "
    "use device_put() to move the inputs to the device so that computation happens on the device.",
    codes.DEVICE_COMPUTE_ON_HOST,
    severity="warning",
    status="",
    stable='Found an instruction ("{name}") which does device compute in host memory space.',
)
SLICE_ON_HOST = XlaMessage(
    "slice-on-host",
    "Encountered {opcode} on tensor which is in host memory. {name} does not move the tensor back "
    "to device. {name} will be converted into host compute.",
    codes.HOST_SLICE_NOT_MOVED_TO_DEVICE,
    severity="warning",
    status="",
)
DUS_NOT_BROADCAST = XlaMessage(
    "dus-not-broadcast",
    'DynamicUpdateSlice "{name}"\'s first operand is not the result of a broadcast.',
    codes.HOST_UPDATE_INTO_DEVICE_BUFFER,
)
DUS_DEVICE_PARAMETER = XlaMessage(
    "dus-device-parameter",
    'Entry computation parameter "{name}" (shape index {{{index}}}) is not in host memory space.',
    codes.HOST_UPDATE_INTO_DEVICE_BUFFER,
)
WHILE_CONDITION_COMPUTE = XlaMessage(
    "while-condition",
    'Tensor which is moved to host is used by an invalid instruction ("{name}") during while condition body.',
    codes.HOST_VALUE_IN_WHILE_CONDITION,
)
WHILE_CONDITION_ROOT = XlaMessage(
    "while-condition-root",
    "Check failed: !tmp_shape_index.empty() Expected shape index to be non-empty.",
    codes.HOST_VALUE_IN_WHILE_CONDITION,
    severity="crash",
    status="",
)
ALIASED_INTO_ONE_RESULT = XlaMessage(
    "aliased-into-one-result",
    WHILE_CONDITION_ROOT.template,
    codes.HOST_ALIASED_INTO_ONE_RESULT,
    severity="crash",
    status="",
    variants=("Check failed: output_shape.has_layout()",),
)
"""libtpu 0.0.42.1's CHECKs where a custom call aliases a host value into one of its several
results (``XlaGeneration.tpu_custom_call_tuple_alias_aborts``): ``host_offload_utils.cc:98`` where
an element of the call's tuple is read, ``host_offloader.cc:343`` where the whole tuple is
returned. The first is :data:`WHILE_CONDITION_ROOT`'s text, so it is left out of
:data:`HOST_OFFLOADER_MESSAGES` (``explain`` reads that text as the loop's) and a verdict with
it names no one code (``rules.message_codes``)."""
PURE_MEMORY_OFFLOAD = XlaMessage(
    "pure-memory-offload",
    'Tensor which is moved to host (starting from {start}) is used by an instruction ("{name}") '
    "which is not acceptable during pure memory offload.",
    codes.DEVICE_COMPUTE_ON_HOST,
    stable='is used by an instruction ("{name}") which is not acceptable during pure memory offload.',
)
HOST_COMPUTE_DISABLED = XlaMessage(
    "host-compute-disabled", "Automatic host compute offloading is disabled.", codes.DEVICE_COMPUTE_ON_HOST
)
MULTI_OPERAND_CHECK = XlaMessage(
    "multi-operand-crash",
    "Expecting instruction {name} to have 1 operand, but it has {count}.",
    None,
    severity="crash",
    status="",
    stable="Expecting instruction {name} to have 1 operand, but it has",
)
"""XLA's main-branch CHECK (openxla/xla#34565); no released compiler was seen to fail it."""
SHAPE_CHANGING_ANNOTATION = XlaMessage(
    "shape-changing-annotation",
    "RET_CHECK failure (.../hlo_instruction.cc) ShapeUtil::CompatibleIgnoringFpPrecision(shape(), "
    "new_producer->shape())",
    codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE,
    status="INTERNAL",
    stable="ShapeUtil::CompatibleIgnoringFpPrecision(shape(), new_producer->shape())",
)
"""Not the host offloader's but the model raises it (the walk meets the annotation); OFL1207's page words it."""

HOST_OFFLOADER_MESSAGES: tuple[XlaMessage, ...] = (
    OUTPUT_NOT_HOST,
    DUS_NOT_BROADCAST,
    DUS_DEVICE_PARAMETER,
    WHILE_CONDITION_COMPUTE,
    WHILE_CONDITION_ROOT,
    PURE_MEMORY_OFFLOAD,
    HOST_COMPUTE_DISABLED,
    MULTI_OPERAND_CHECK,
    HOST_COMPUTE,
    SLICE_ON_HOST,
)
"""What the host offloader itself says, in the order ``explain`` looks for them."""
BY_KIND: dict[str, XlaMessage] = {message.kind: message for message in HOST_OFFLOADER_MESSAGES}
