"""XLA's own message texts, each written once: what the compilers print, with the names left open.

The analysis fills them in with XLA's names for the user's module (so a finding can be found
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
    """The line of a compiler's error that says what went wrong (not the status line alone,
    nor XLA's "Suspected Python Code Location" frames)."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    status = ""
    for line in lines:
        if _PREFIX_ONLY.match(line):
            status = status or line.split(":", 1)[0] + ": "
            continue
        if line.startswith(("Suspected Python Code Location", "See https://")) or "[<module>]" in line:
            break
        text = line if ":" in line[:40] else status + line
        return text if len(text) <= limit else text[: limit - 3] + "..."
    return lines[0] if lines else ""


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
FUSION_SHAPE = XlaMessage(
    "gpu-host-fusion-shape",
    "Fused computation shape (...) is not equal to the fusion shape (...:S(5))",
    codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE,
    status="INTERNAL",
    stable="Fused computation shape (",
)
HOST_COMPUTE_ALIAS = XlaMessage(
    "tpu-host-compute-alias",
    "Check failed: host_execute_operand_subshape == ShapeUtil::GetSubshape(host_instr->shape(), "
    "host_execute_output_shape_index)",
    codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE,
    severity="crash",
    status="",
    stable="Check failed: host_execute_operand_subshape ==",
)
_ASYNC_SHAPE_0_0_50 = "(opcode: async-start) expects the shape of operand 0 to match the async shape"
"""libtpu 0.0.50.1's wording of the async-start shape check (it names the host call first)."""
HOST_ASYNC_SHAPE = XlaMessage(
    "tpu-host-async-shape",
    "The async-start expects the shape of operand 0 to match the async shape at index {{0}} (... vs ...S(5))",
    codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE,
    status="INTERNAL",
    stable="The async-start expects the shape of operand 0 to match the async shape",
    variants=(_ASYNC_SHAPE_0_0_50,),
)
"""How libtpu also fails on a loop's dot mixing host and device memory, once the loop is
differentiated (the host compute becomes an async host call)."""
CUSTOM_FUSION_BACKEND_CONFIG = XlaMessage(
    "tpu-host-custom-fusion",
    "RET_CHECK failure (.../cpu/thunk_emitter.cc) instruction->has_backend_config() Fusion must have backend config",
    codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE,
    status="INTERNAL",
    stable="instruction->has_backend_config() Fusion must have backend config",
)
_GPU_SCATTER_VERIFIER = (
    "!(operand_memory_space == Layout::kHostMemorySpace && result_memory_space == Layout::kDefaultMemorySpace)"
)
"""XLA:GPU's verifier on the same scatter when it is the only output (a RET_CHECK failure)."""
HOST_TUPLE_SHAPE = XlaMessage(
    "gpu-host-tuple-shape",
    "Expected instruction to have shape equal to (...), actual shape is (...S(5)...)",
    codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE,
    status="INTERNAL",
    stable="Expected instruction to have shape equal to (",
    variants=(_GPU_SCATTER_VERIFIER,),
)
NESTED_STACK_HOST_CALL = XlaMessage(
    "tpu-nested-stack-host-call",
    HOST_ASYNC_SHAPE.template,
    codes.HOST_STACK_OF_INNER_LOOP,
    status="INTERNAL",
    stable=HOST_ASYNC_SHAPE.stable,
    variants=HOST_ASYNC_SHAPE.variants,
)
"""libtpu (0.0.17.1, 0.0.42.1, 0.0.50.1): host compute reading a host buffer that an outer loop
stacked from an inner loop's host output; the buffer has lost its host layout (the text of
:data:`HOST_ASYNC_SHAPE`, so XLA's text alone does not say which rule)."""
GPU_NESTED_STACK = XlaMessage(
    "gpu-nested-stack-tuple-shape",
    HOST_TUPLE_SHAPE.template,
    codes.HOST_STACK_OF_INNER_LOOP,
    status="INTERNAL",
    stable=HOST_TUPLE_SHAPE.stable,
)
"""XLA:GPU (jax-cuda12-plugin 0.10.2, 0.12.0.1): an outer loop's tuple that carries a host buffer
stacked from an inner loop's host output loses the host memory space (the text of
:data:`HOST_TUPLE_SHAPE`)."""
UNPINNED_PARAMETER = XlaMessage(
    "tpu-unpinned-parameter",
    "Shape mismatch between parameter number {index} and its operand in {name}",
    codes.UNPINNED_HOST_MEMORY,
    status="INTERNAL",
    stable="Shape mismatch between parameter number {index} and its operand in",
)
_DMA_HBM_TO_HBM = "Unimplemented DMA from hbm to hbm."
"""libtpu's text for a copy into an output buffer that lies in device memory (HBM) while the
output is declared elsewhere; two rules meet it, so XLA's text alone does not say which."""
UNPINNED_OUTPUT = XlaMessage(
    "tpu-unpinned-output",
    _DMA_HBM_TO_HBM,
    codes.UNPINNED_HOST_MEMORY,
    status="FAILED_PRECONDITION",
)
ASYNC_SLICE_DIMENSIONS = XlaMessage(
    "tpu-async-slice-dimensions",
    "Async slice only supports slicing in 1 dimension",
    codes.HOST_SLICE_IN_SEVERAL_DIMENSIONS,
    status="UNIMPLEMENTED",
)
"""libtpu 0.0.42.1 copies a slice of a host value to device as an async slice, which takes
one sliced dimension only (``XlaGeneration.tpu_async_slice_one_dimension_only``)."""
DONATED_DEVICE_BUFFER = XlaMessage(
    "tpu-donated-device-buffer",
    _DMA_HBM_TO_HBM,
    codes.DONATED_BUFFER_IN_OTHER_MEMORY,
    status="FAILED_PRECONDITION",
)
"""libtpu: an output declared ``pinned_host`` that reuses a donated device argument's buffer."""
DONATED_HOST_BUFFER = XlaMessage(
    "tpu-donated-host-buffer",
    "Unimplemented DMA from host to host.",
    codes.DONATED_BUFFER_IN_OTHER_MEMORY,
    status="FAILED_PRECONDITION",
)
"""libtpu: a device output that reuses a donated ``pinned_host`` argument's buffer."""
GPU_DONATED_DEVICE_BUFFER = XlaMessage(
    "gpu-donated-device-buffer",
    "Copy-start %copy-start = (...) copy-start(...) doesn't have correct host memory space color S(5)",
    codes.DONATED_BUFFER_IN_OTHER_MEMORY,
    status="INTERNAL",
    stable="doesn't have correct host memory space color S(5)",
    variants=("has host memory space S(5) on both source and destination, which is unsupported",),
)
"""XLA:GPU: an output declared host memory that reuses a donated device argument's buffer
(jax-cuda12-plugin 0.10.2's wording; 0.12.0.1 says the copy has S(5) on both sides)."""
ASYNC_UPDATE_LANE_SLICE = XlaMessage(
    "tpu-async-update-lane-slice",
    "Lane slice updating is not supported in async dynamic update slice yet.",
    codes.HOST_COPY_LANE_SLICE,
    status="UNIMPLEMENTED",
)
"""libtpu 0.0.42.1: an update into a host buffer that covers part of the lane dimension only."""
LANE_SLICE_SIZE = XlaMessage(
    "tpu-lane-slice-size",
    "Slicing lane dimension is only supported when the lane slice size is a multiple of LaneCount.",
    codes.HOST_COPY_LANE_SLICE,
    status="UNIMPLEMENTED",
)
"""libtpu 0.0.50.1: a copy between host and device of a lane slice that is not whole vregs."""
SHAPE_CHANGING_ANNOTATION = XlaMessage(
    "shape-changing-annotation",
    "RET_CHECK failure (.../hlo_instruction.cc) ShapeUtil::CompatibleIgnoringFpPrecision(shape(), "
    "new_producer->shape())",
    codes.BACKEND_CANNOT_BUILD_HOST_COMPUTE,
    status="INTERNAL",
    stable="ShapeUtil::CompatibleIgnoringFpPrecision(shape(), new_producer->shape())",
)

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
BACKEND_MESSAGES: tuple[XlaMessage, ...] = (
    FUSION_SHAPE,
    HOST_COMPUTE_ALIAS,
    HOST_ASYNC_SHAPE,
    CUSTOM_FUSION_BACKEND_CONFIG,
    HOST_TUPLE_SHAPE,
    UNPINNED_PARAMETER,
    UNPINNED_OUTPUT,
    SHAPE_CHANGING_ANNOTATION,
    ASYNC_SLICE_DIMENSIONS,
    DONATED_DEVICE_BUFFER,
    DONATED_HOST_BUFFER,
    GPU_DONATED_DEVICE_BUFFER,
    ASYNC_UPDATE_LANE_SLICE,
    LANE_SLICE_SIZE,
    NESTED_STACK_HOST_CALL,
    GPU_NESTED_STACK,
)
"""What the TPU and GPU backends say when they cannot build what the offloader decided."""
ALL_MESSAGES = HOST_OFFLOADER_MESSAGES + BACKEND_MESSAGES


def backend_codes(message: str) -> frozenset[str]:
    """The codes of every backend failure whose text ``message`` holds: one code, or several
    where rules share XLA's text (libtpu's async-start shape check: OFL1207, OFL1212)."""
    return frozenset(known.code for known in BACKEND_MESSAGES if known.code and known.pattern().search(message))


BY_KIND: dict[str, XlaMessage] = {message.kind: message for message in ALL_MESSAGES}
