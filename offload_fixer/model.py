"""Plain data shared by every stage: lower -> analyse -> diagnose -> plan fix -> rewrite.

Everything here is a frozen dataclass that round-trips through JSON (``to_dict`` /
``from_dict``), so a report written by ``offload-fixer run --report`` can be read back by
``offload-fixer fix`` in another process, and the static check and the dynamic analysis
speak the same language.

Over 500 lines on purpose: every shared dataclass and the one JSON codec they round-trip
through, so no stage defines its own.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Severity = Literal["error", "warning", "info"]

# Memory kinds as JAX spells them. JAX calls both host kinds "host"; XLA's host offloader
# moves values to memory space S(5) for either annotation, but only ``pinned_host`` parameters
# and outputs are S(5) (``unpinned_host`` is S(6) on TPU and not host memory to the walk).
PINNED_HOST = "pinned_host"
UNPINNED_HOST = "unpinned_host"
DEVICE = "device"
TPU_HBM = "tpu_hbm"
"""The name of device memory before JAX 0.4.25 (when ``unpinned_host`` named host memory)."""
HOST_KINDS: frozenset[str] = frozenset({PINNED_HOST, UNPINNED_HOST})
"""Memory kinds JAX treats as host memory (a move there is a move to host)."""
HOST_MEMORY_SPACE_KINDS: frozenset[str] = frozenset({PINNED_HOST})
"""Memory kinds of parameters and outputs that XLA's entry layout puts in host memory (S(5))."""
DEVICE_KINDS: frozenset[str] = frozenset({DEVICE, TPU_HBM})
"""Memory kinds of device memory, under every JAX's names."""
TARGETS: tuple[str, ...] = ("tpu", "gpu")
DEPRECATED_TARGETS: dict[str, str] = {"gpu-legacy": "gpu"}
"""Targets of earlier releases: ``gpu-legacy`` modelled an XLA:GPU that failed like TPU, which
every released XLA:GPU does, so it is ``gpu`` now."""
TARGET_CHOICES: tuple[str, ...] = TARGETS + tuple(DEPRECATED_TARGETS)
"""What a command line or a configuration accepts (deprecated names still work)."""
FORMATS: tuple[str, ...] = ("text", "concise", "json", "sarif", "github")
FORMAT_ALIASES = {"full": "text"}
"""ruff's name of the text output (``--output-format full``), accepted for it."""
"""Output formats of the command line and ``format`` in ``[tool.offload-fixer]``."""


def normalize_target(target: str) -> str:
    """``target`` as the analysis knows it; raises ``ValueError`` for an unknown one."""
    target = DEPRECATED_TARGETS.get(target, target)
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    return target


OriginKind = Literal["move_to_host", "host_argument", "offload_policy", "host_compute"]
EditSafety = Literal["safe", "unsafe"]
"""What one edit is: ``unsafe`` where it can change what the program computes or where a value lives."""
Safety = Literal[EditSafety, "display-only"]
"""What a fix is: its edits' safety, or ``display-only`` where no edit can be made."""
FixStrategy = Literal["device", "host"]
FIX_STRATEGIES: tuple[FixStrategy, ...] = typing.get_args(FixStrategy)
"""The ways to fix a host value at a device output: move it back to device, or declare the output host."""
WORKAROUND = "workaround"
STRATEGIES: tuple[str, ...] = ("auto", *FIX_STRATEGIES, WORKAROUND)
"""What ``--strategy`` and ``strategy`` accept: ``auto`` chooses per origin; ``workaround`` is
``auto`` that also edits around a known bug of the released compiler (:class:`CompilerBugNote`),
which the other strategies leave to an upgrade."""
OutputVerdict = Literal["device", "host", "streamed", "repaired", "error"]


@dataclass(frozen=True)
class Span:
    """A range of user source, 1-based lines and columns (columns as MLIR/Python report them)."""

    path: str
    line: int
    col: int = 1
    end_line: int | None = None
    end_col: int | None = None
    function: str | None = None
    cell: int | None = None
    """In a notebook shown to the user: the 1-based position of the cell that ``line`` counts
    in. None elsewhere, and inside the tool, where a notebook's lines are its program's
    (the concatenation of its code cells, ``offload_fixer.notebook``)."""

    def __str__(self) -> str:
        return position_text(self.path, self.line, self.col, self.cell)


def position_text(path: str, line: int, col: int, cell: int | None = None) -> str:
    """``path:line:col``, or ``nb.ipynb:cell 3:12:5`` in a notebook's cell."""
    where = f"{path}:cell {cell}" if cell is not None else path
    return f"{where}:{line}:{col}"


class Role:
    """What a :class:`Step` does with the host value, in the words a trace shows; the fix
    planner reads them (a step of host compute is fixed by a move to device before it)."""

    MOVE_TO_HOST = "move to host"
    MOVE_TO_DEVICE = "move to device"
    HOST_ARGUMENT = "host argument"
    PARAMETER = "parameter"
    HOST_COMPUTE = "host compute"
    HOST_COMPUTATION = "host computation"
    """A computation the program itself runs on the host (``compute_on("device_host")``)."""
    MEMORY_OP = "memory op"
    LOOP_CARRY = "loop carry"
    COPY = "copy"
    NOOP_MOVE = "device_put that does not move it"
    MIXED_COND = "cond with a device branch"
    OUTPUT = "output"
    FAILURE = "failure"


@dataclass(frozen=True)
class Step:
    """One instruction on the path from the origin to the output, as XLA's walk visits it."""

    op: str
    role: str
    """One of :class:`Role`'s."""
    span: Span | None = None


@dataclass(frozen=True)
class Sharding:
    """How one argument or output of a partitioned module is laid out over its devices: the
    mesh axes (or, without names, the number of pieces) each dimension is split into, and the
    piece one device holds. A pod's mesh in the words a finding uses."""

    dtype: str
    """The element type, as JAX prints it: ``f32``, ``bf16``, ``s32``."""
    shape: tuple[int, ...]
    """The whole value's shape."""
    tiles: tuple[int, ...]
    """Pieces along each dimension (1: not split)."""
    axes: tuple[tuple[str, ...], ...] = ()
    """The mesh axes each dimension is split over (``(), ("fsdp",), ("tensor",)``); empty where
    the module names no mesh (GSPMD shardings: only ``tiles``)."""
    mesh: tuple[tuple[str, int], ...] = ()
    """The mesh's axes and sizes, in order: ``(("fsdp", 64), ("tensor", 4))``."""
    sub_axes: bool = False
    """Some dimension is split over part of a mesh axis (Shardy's sub-axes: ``"fsdp":(1)2``)."""

    @property
    def shard(self) -> tuple[int, ...]:
        """One device's piece (the last one, where a dimension does not split evenly, is smaller)."""
        return tuple(-(-size // tiles) for size, tiles in zip(self.shape, self.tiles))

    def layout(self) -> str:
        """``f32[4,256,512] as P(None, 'fsdp', 'tensor'): f32[4,4,128] per device`` (the mesh
        is said once for a finding: :func:`mesh_text`)."""
        whole = _shape_text(self.dtype, self.shape)
        if all(t == 1 for t in self.tiles):
            return f"{whole} replicated"
        if self.axes:
            spec = ", ".join(
                "None" if not names else repr(names[0]) if len(names) == 1 else repr(names) for names in self.axes
            )
            split = f"as P({spec})"
        else:
            split = "split " + "x".join(map(str, self.tiles))
        return f"{whole} {split}: {_shape_text(self.dtype, self.shard)} per device"


def mesh_text(mesh: Iterable[tuple[str, int]]) -> str:
    """``fsdp=64 x tensor=4 (256 devices)``."""
    axes = list(mesh)
    devices = 1
    for _, size in axes:
        devices *= size
    return " x ".join(f"{name}={size}" for name, size in axes) + f" ({devices} devices)"


def _shape_text(dtype: str, shape: tuple[int, ...]) -> str:
    return f"{dtype}[{','.join(map(str, shape))}]"


@dataclass(frozen=True)
class Origin:
    """Where a value became host memory: a move to host, a host argument, an offload policy."""

    kind: OriginKind
    memory_kind: str
    span: Span | None = None
    detail: str = ""
    key: str = ""
    """Stable identity within one report; diagnostics sharing it share one root cause."""
    argument: str | None = None
    """For ``host_argument``: the argument's label, parameter name then pytree path inside it,
    as JAX writes it (``opt_state['mu']['b']``); the fix planner finds the parameter by it."""
    argument_index: int | None = None
    """For ``host_argument``: the flat index of the argument among ``@main``'s parameters."""
    value_type: str = ""
    """For ``host_argument``: the argument's tensor type (``tensor<8xf32>``)."""
    sharding: Sharding | None = None
    """For ``host_argument`` of a module partitioned over several devices: its layout on them."""


@dataclass(frozen=True)
class RematPolicy:
    """A remat (``jax.checkpoint``) offload policy as the traced program applies it: what it can
    offload, and whether the program offloads anything through it."""

    span: Span | None
    """Where the checkpointed function is called (the first user frame of the remat)."""
    policy: str
    """The policy function's name (``save_and_offload_only_these_names``)."""
    differentiated: bool
    """Whether the program differentiates the checkpointed function (a policy acts only then)."""
    offloads: bool
    """Whether the traced program moves any residual of it to host memory."""
    matched: int
    """Operations the policy marks offloadable: of the checkpointed function as the backward
    pass recomputes it, and those whose values it takes as residuals."""
    matched_to_host: int
    """Of those, the ones it sends to a host memory kind."""
    offload_names: tuple[str, ...] | None
    """The ``checkpoint_name`` names it offloads, where it offloads by name."""
    tagged_names: tuple[str, ...]
    """The names ``checkpoint_name`` tags anywhere in the traced program."""
    destination: str | None
    """The memory kind it offloads to (``offload_dst``), where it says one."""
    host_moves: bool = False
    """Whether the traced program moves anything to host memory at all (its residuals may be
    among the moves in ways the policy's own decisions do not show: JAX before 0.7 moves a
    loop's stacked residuals after the loop)."""
    host_inputs: bool = False
    """Whether the traced program takes arguments in host memory: residuals another program
    offloaded may reach it that way (the backward half of a ``jax.vjp``)."""


@dataclass(frozen=True)
class FixOption:
    """A remedy in words; the planner turns the chosen one into a codemod target."""

    strategy: FixStrategy
    title: str
    description: str
    safety: Safety = "safe"


@dataclass(frozen=True)
class CompilerBugNote:
    """A finding that is a bug of the released compiler, not of the program: a later release
    compiles it (``jax_compat.compiler_bugs``)."""

    compiler: str
    """The compiler and release that fail: ``libtpu 0.0.42.1``."""
    fixed_in: str
    """The first release measured to compile it: ``0.0.46.3``."""
    upgrade_jax: str | None
    """The first JAX release that installs the fix, where one does."""
    reference: str
    """The XLA issue or pull request, or why there is none."""


@dataclass(frozen=True)
class FunctionRef:
    """The jitted Python function a module was lowered from."""

    name: str
    path: str | None = None
    line: int | None = None
    cell: int | None = None
    """The notebook cell ``line`` counts in, as :attr:`Span.cell`."""
    jit_path: str | None = None
    jit_line: int | None = None
    """Where ``jax.jit`` was applied to it, when ``run`` saw that be another file than the
    ``def`` (a package's ``__main__.py`` jitting a step defined in ``step.py``): the file whose
    ``out_shardings`` a fix edits."""

    @property
    def eager(self) -> bool:
        """One of JAX's own jits around an eager operation (``slice (eager)``), reported at the
        user's line: no jit of the user's to edit."""
        return self.name.endswith(EAGER_SUFFIX)


EAGER_SUFFIX = " (eager)"
"""How an eager operation's compilation is named: ``slice (eager)``."""


@dataclass(frozen=True)
class Diagnostic:
    code: str
    severity: Severity
    target: str
    message: str
    explanation: str
    output_index: int | None = None
    output_path: str | None = None
    """Pytree path of the output relative to the returned value, in JAX keystr form: ``[0]['mu']``."""
    origin: Origin | None = None
    trace: tuple[Step, ...] = ()
    span: Span | None = None
    """Where an editor should underline: the origin for OFL1200, the offending op otherwise."""
    return_span: Span | None = None
    fixes: tuple[FixOption, ...] = ()
    function: FunctionRef | None = None
    related_outputs: tuple[str, ...] = ()
    """Pytree paths of the other outputs the same origin reaches (one root cause, many outputs)."""
    source: Literal["dynamic", "static"] = "dynamic"
    source_sha256: str | None = None
    """Hash of the function's source file when it was analysed: a fix refuses a file that changed."""
    confirmed: bool | None = None
    """With ``--confirm``: whether the released compiler agrees (``None``: not asked)."""
    xla_message: str | None = None
    """With ``--confirm``: what the compiler said of this finding, in its own words."""
    confirmed_by: str | None = None
    """With ``--confirm``: the compiler asked (``libtpu 0.0.42.1``)."""
    compiler_bug: CompilerBugNote | None = None
    """Where the failure is a known bug of the released compiler: fixed by an upgrade, and
    edited around only with ``--strategy workaround``."""
    sharding: Sharding | None = None
    """For a diagnostic about an output of a module partitioned over several devices (a
    pod's mesh): that output's layout on them, where the module declares it."""

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnostic:
        return _from_jsonable(cls, data)

    @property
    def location(self) -> Span | None:
        return self.span or (self.origin.span if self.origin else None) or self.return_span


@dataclass(frozen=True)
class Report:
    diagnostics: tuple[Diagnostic, ...]
    target: str
    jax_version: str
    module_name: str | None = None
    function: FunctionRef | None = None
    outputs: tuple[OutputInfo, ...] = ()
    predicted: Prediction | None = None
    """The compile outcome the analysis predicts (XLA's first error), for comparison with XLA."""
    xla_generation: str | None = None
    """The released compilers the analysis modelled (those that pair with the installed jaxlib)."""
    xla: XlaVerdict | None = None
    """With ``--confirm``: the released compiler's verdict on the module."""
    unpredicted: tuple[str, ...] = ()
    """With ``--confirm``: where the compiler disagrees with the analysis, in words (a rejection
    the analysis did not predict, an error it predicted that XLA does not give...)."""
    xla_accepted: XlaVerdict | None = None
    """With ``--confirm``: the verdict on the module with every output XLA rejected (error 1200)
    declared host, its last compile (``xla`` itself when XLA rejected none): the unfixed program
    a fix's memory figures are compared with, so ``--fix`` need not compile it again."""
    xla_rejected_outputs: tuple[int, ...] = ()
    """The outputs so declared, in the order XLA rejected them."""

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")

    def by_code(self, code: str) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.code == code)

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        return _from_jsonable(cls, data)


@dataclass(frozen=True)
class OutputInfo:
    """What the analysis decided for one flat output of the entry function."""

    index: int
    path: str
    memory_kind: str
    verdict: OutputVerdict
    """``streamed``: a host value reaches this host output; ``repaired``: the output is a move to
    host that XLA turns into a copy (the whole single output); ``error``: error 1200."""
    compiled_memory_kind: str | None = None
    """The memory kind the compiled executable returns this output in, where it differs from
    what the module declares on some target (``unpinned_host`` outputs, repaired moves)."""
    value_type: str = ""
    """The output's tensor type (``tensor<4x8xf32>``): which outputs can give back a streamed
    argument (the same type)."""
    sharding: Sharding | None = None
    """Its layout over the devices of a partitioned module, where the module declares it."""
    declared: bool = False
    """Whether the jit gives it a sharding (``out_shardings``): a memory kind the author chose,
    not one JAX inferred from what computes it."""


@dataclass(frozen=True)
class Prediction:
    """How the analysis expects XLA's compilation to end: XLA stops at its first error.

    This is what a released compiler's :class:`XlaVerdict` is compared with, field by field.
    """

    outcome: Literal["compiled", "rejected", "aborted"]
    """``aborted``: the analysis expects the compiler to die on a CHECK (TPU loop dots...)."""
    code: str | None = None
    """The diagnostic code of the error XLA stops at (``OFL1200``...), ``None`` when it compiles."""
    instruction: str | None = None
    """The instruction XLA's message names, as XLA names it (``params.1``, ``mul.3``)."""
    output_index: int | None = None
    """For ``OFL1200``: the flat output the offending value reaches."""


@dataclass(frozen=True)
class MemoryFigures:
    """A compiled program's memory, as the compiler's ``memory_analysis()`` gives it
    deviceless: device (HBM) and host bytes of its arguments, outputs and temporaries; and how
    many of its arguments and outputs are in host memory."""

    argument: int = 0
    output: int = 0
    temp: int = 0
    alias: int = 0
    host_argument: int = 0
    host_output: int = 0
    host_temp: int = 0
    host_buffers: int = 0
    """Entry arguments and outputs in host memory, each of whose copies between host and device
    the compiler stages in HBM (:data:`HOST_BUFFER_STAGING`); 0 where they were not counted."""

    @property
    def device_total(self) -> int:
        """HBM the program holds while it runs (aliased outputs counted once)."""
        return self.argument + self.output + self.temp - self.alias

    @property
    def host_total(self) -> int:
        return self.host_argument + self.host_output + self.host_temp


HBM_FLOOR = 1 << 20
"""HBM a fix may hold beyond the program without offload and still keep its purpose, besides the
staging of each host buffer (:data:`HOST_BUFFER_STAGING`): the compiler's code and buffers for
its copies between host and device (measured: a 16-byte argument moved to device and its result
kept on host holds 126 KiB against 1 KiB, libtpu 0.0.42.1 and 0.0.50.1;
`examples/unpinned_host_trap.py` 58.5 KiB more, 0.0.50.1), not the state an offload is for,
which a model that needs it holds in MiB to GiB (the chip's case: 17.78 GiB against 11.5 GiB)."""

HOST_BUFFER_STAGING = 128 << 10
"""HBM the compiler may hold for each host buffer of a program (:attr:`MemoryFigures.host_buffers`),
whatever its size: libtpu stages every copy between host and device in HBM, so a state of many
small leaves costs HBM in proportion to its leaves, not its bytes. Measured deviceless (libtpu
0.0.42.1 and 0.0.50.1), N host arguments moved to device, N results kept on host, or both (N 1
to 64, leaves of 16 B to 32 KiB): at most 94 KiB more for each host buffer added than the same
program in device memory. Adam's 9 state leaves moved to device and returned to host hold
1.42 MiB beyond the step without offload (0.0.42.1), for 5 KiB of state."""


def defeats_offload(after: MemoryFigures, without: MemoryFigures | None) -> bool:
    """A fixed program that keeps state in host memory yet holds more HBM than the program
    without its offload, beyond :data:`HBM_FLOOR` and its host buffers' staging: the offload no
    longer saves the memory it was for."""
    if without is None or after.host_total == 0:
        return False
    staging = HBM_FLOOR + HOST_BUFFER_STAGING * after.host_buffers
    return after.device_total > without.device_total + staging


HOST_OUTPUTS_BASELINE = "host outputs"
NO_OFFLOAD_BASELINE = "no offload"
"""The two programs a fix's figures are compared with (:attr:`FixMeasurement.baseline`)."""


@dataclass(frozen=True)
class FixMeasurement:
    """A fix's cost in a released compiler's figures: one compilation of the fixed function
    against the same compilation of the unfixed one with its failing outputs declared host
    (the program XLA accepts unchanged, as ``--confirm`` compiles it), or, where XLA cannot
    compile that, without its offload (:attr:`baseline`); and against the program without its
    offload (:attr:`no_offload`), which a fix for offloaded state must hold less HBM than, or it
    defeats the offload. Text, JSON, SARIF, the run report and the language server all carry
    this record and its one :attr:`summary`. HBM is the compiler's ``memory_analysis()``
    (arguments, outputs and temporaries a program needs), never an allocator's peak, which
    leaves the temporaries out."""

    function: str
    target: str
    compiler: str
    after: MemoryFigures
    before: MemoryFigures | None = None
    """``None`` where no unfixed program compiles: only ``after`` is known."""
    baseline: str = HOST_OUTPUTS_BASELINE
    """What ``before`` is: ``host outputs``, the unfixed program with its failing outputs
    declared host; ``no offload``, the unfixed program with every host memory kind made
    device memory (where XLA cannot compile the first: a scatter or update into a host
    buffer, a loop over a host stack), so the delta is what the fix keeps of the offload."""
    no_offload: MemoryFigures | None = None
    """The unfixed program with every host memory kind made device memory: what the offload
    saves is measured against it (``None`` where it does not compile)."""
    moved: int | None = None
    """Bytes one call of the fixed program copies between host and device memory (moves to and
    from host, times the trips of the loops around them; host outputs written back)."""

    @property
    def defeats_offload(self) -> bool:
        return defeats_offload(self.after, self.no_offload)

    @property
    def summary(self) -> str:
        """``HBM 8.0 MiB (+4.0 MiB temporaries; -2.0 MiB against no offload), host 2.0 GiB kept,
        4.0 MiB moved host<->device per call``: the HBM the fixed program holds, its change
        against the unfixed program and its largest part, against the program without its
        offload, what host memory keeps, and what one call moves (absolute figures where there
        is no before)."""
        after, before = self.after, self.before
        deltas = []
        if before is not None:
            parts = {
                "arguments": after.argument - before.argument,
                "outputs": after.output - before.output,
                "temporaries": after.temp - before.temp,
            }
            largest = max(parts, key=lambda part: abs(parts[part]))
            delta = after.device_total - before.device_total
            deltas.append(_signed(delta) + (f" {largest}" if delta else ""))
        if self.no_offload is not None and (before is None or self.baseline != NO_OFFLOAD_BASELINE):
            deltas.append(f"{_signed(after.device_total - self.no_offload.device_total)} against no offload")
        elif before is not None and self.baseline == NO_OFFLOAD_BASELINE:
            deltas[-1] += " against no offload"
        hbm = f"HBM {byte_size(after.device_total)}" + (f" ({'; '.join(deltas)})" if deltas else "")
        if before is None or after.host_total >= before.host_total:
            host = f"host {byte_size(after.host_total)}" + (" kept" if before is not None else "")
        else:
            host = f"host -{byte_size(before.host_total - after.host_total)} (now {byte_size(after.host_total)})"
        moved = f", {byte_size(self.moved)} moved host<->device per call" if self.moved is not None else ""
        return f"{hbm}, {host}{moved}"

    def to_dict(self) -> dict[str, Any]:
        """The figures in bytes, and :attr:`summary` beside them (ignored when read back)."""
        return {**_to_dict(self), "summary": self.summary}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FixMeasurement:
        return _from_jsonable(cls, data)


def _signed(n: int) -> str:
    return f"{'+' if n >= 0 else '-'}{byte_size(abs(n))}"


@dataclass(frozen=True)
class StepMeasurement:
    """One fixed compilation as ``run --fix`` on an accelerator ran it: the first run's (the
    unfixed program's, compiled without its offload where it failed there) against the fixed
    program's, run again in the same process. Steps are the median call, each waited for
    (``block_until_ready``); HBM is the compiler's memory analysis of what ran, as in
    :class:`FixMeasurement`. What the run prints of it is :attr:`summary`."""

    compilation: str
    """``jit(train_step)``."""
    function: str
    path: str | None
    device: str
    """``TPU v5 lite``, or the emulated accelerator that stood in for it."""
    step_before_ms: float | None
    """``None`` where no call was timed (a compilation called once: its call compiled it)."""
    step_after_ms: float | None
    calls_before: int
    """Calls timed (each after the one that compiled)."""
    calls_after: int
    before: MemoryFigures | None
    after: MemoryFigures | None
    """``None`` where the fixed program did not compile it again, or the compiler gave no figures."""
    before_patched: bool = False
    """``before`` is the first run's compilation without its offload (it failed on the accelerator)."""

    @property
    def summary(self) -> str:
        """``jit(train_step): step 1.93 ms -> 0.73 ms, HBM 450.0 KiB -> 731.5 KiB (the compiler's
        memory analysis; before: ...)``."""
        step = f"step {_milliseconds(self.step_before_ms)} -> {_milliseconds(self.step_after_ms)}"
        hbm = f"HBM {_hbm(self.before)} -> {_hbm(self.after)}"
        before = "; before: the first run's compilation without its offload" if self.before_patched else ""
        return f"{self.compilation}: {step}, {hbm} (the compiler's memory analysis{before})"

    def to_dict(self) -> dict[str, Any]:
        """The figures (steps in ms, memory in bytes), and :attr:`summary` beside them."""
        return {**_to_dict(self), "summary": self.summary}


def _milliseconds(ms: float | None) -> str:
    return "not timed" if ms is None else f"{ms:.2f} ms"


def _hbm(memory: MemoryFigures | None) -> str:
    return "unknown" if memory is None else byte_size(memory.device_total)


@dataclass(frozen=True)
class MeasuredFix:
    """What the verification stage found of a fix ``run`` checked before writing (``--fix``),
    showing (``--diff``) or marking it (``[*]``): its figures where the compiler measured it, or
    why it is not written (``refused``). The ``fixes`` of the JSON document and the run report,
    SARIF's notifications, and what the language server titles a quick fix with (or offers none
    for) while the file is as the run analysed it."""

    path: str
    title: str
    """The plan's title (``Move x to device ... (line 5)``), as the editor's quick fix reads."""
    strategy: str
    safety: str
    codes: tuple[str, ...]
    measured: tuple[FixMeasurement, ...]
    """Each compilation of its function, measured with the file's other chosen fixes applied."""
    written: bool = False
    span: Span | None = None
    """Where its first finding is."""
    unverified: str = ""
    """``not verified: <why>`` for a fix written or shown without being lowered first (then
    ``measured`` is empty); empty for a fix lowered from its fixed source."""
    refused: str = ""
    """Why the verification stage does not write this fix (it does not lower, the compiler
    rejects it, the fixed source still fails); empty for a fix that holds."""
    held: bool | None = None
    """``run --fix`` on an accelerator: whether the fix held when the fixed program ran again
    there (each fixed compilation compiled without errors, the program ended well); ``None``
    where it was not run again."""
    steps: tuple[StepMeasurement, ...] = ()
    """That run's figures of each compilation of its function(s), before and after."""

    @property
    def summary(self) -> str:
        if self.refused:
            return f"not written: {self.refused}"
        summary = self.unverified or describe_measurements(self.measured)
        if self.held is None:
            return summary
        device = self.steps[0].device if self.steps else "the accelerator"
        ran = f"{'held' if self.held else 'did not hold'} on {device}" + "".join(
            f"; {step.summary}" for step in self.steps
        )
        return f"{summary}; {ran}" if summary else ran

    def to_dict(self) -> dict[str, Any]:
        return {
            **_to_dict(self),
            "measured": [m.to_dict() for m in self.measured],
            "steps": [step.to_dict() for step in self.steps],
            "summary": self.summary,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MeasuredFix:
        return _from_jsonable(cls, data)


def describe_measurements(measured: Iterable[FixMeasurement]) -> str:
    """The line a fix's figures read as: one compilation's :attr:`FixMeasurement.summary`, or
    each function's where the fix was measured in several (``f: HBM ...; g: HBM ...``)."""
    measured = list(measured)
    if len({m.function for m in measured}) <= 1:
        return "; ".join(dict.fromkeys(m.summary for m in measured))
    return "; ".join(f"{m.function}: {m.summary}" for m in measured)


def byte_size(n: int) -> str:
    """``4.0 MiB``: a byte count as the fixes' figures read."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


@dataclass(frozen=True)
class XlaVerdict:
    """What a released XLA compiler made of one module: the ground truth of every verdict."""

    target: str
    compiler: str
    """The compiler that judged, ``libtpu 0.0.42.1`` or ``jax-cuda12-plugin 0.10.2``."""
    outcome: Literal["compiled", "rejected", "aborted", "unsupported"]
    """``aborted``: the compiler process died (a CHECK); ``unsupported``: it could not be asked."""
    code: str | None = None
    """The diagnostic code XLA's error corresponds to, ``None`` for errors no rule covers."""
    error: str | None = None
    """XLA's own error id when its message carries one (``E1200``)."""
    message: str = ""
    """XLA's error text as the compiler raised it; empty when it compiled."""
    instruction: str | None = None
    """The instruction XLA's error names (``(starting from params.1)``)."""
    output_index: int | None = None
    """The flat output XLA's instruction trace ends at, when it logged one."""
    trace: tuple[str, ...] = ()
    """The instructions of XLA's ``Instruction trace leading to error``."""
    output_memory_kinds: tuple[str, ...] = ()
    """Each flat output's memory kind in the compiled executable."""
    host_compute: tuple[str, ...] = ()
    """Instructions XLA's warnings say it converted into host compute, in log order."""
    host_slices: tuple[str, ...] = ()
    """Slices XLA's warnings say stay on host (converted into host compute)."""
    memory: MemoryFigures | None = None
    """The compiled program's memory figures (when it compiled and the compiler gives them)."""

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> XlaVerdict:
        return _from_jsonable(cls, data)


# ---------------------------------------------------------------------------------------
# Pytree paths
PathKey = tuple[Literal["index", "key", "attr"], Any]


def parse_output_path(path: str) -> tuple[PathKey, ...]:
    """Split ``[0]['mu'].count`` into ``(("index", 0), ("key", "mu"), ("attr", "count"))``.

    The one reader of pytree paths, for every stage (the analysis, the planner, the codemods'
    ``--output-path``). Reads JAX's ``keystr`` and ``jax.result_info`` spellings (``result[0]``,
    ``result``, ``""``): a subscript holds a Python literal (quoting as Python's), else the text
    JAX wrote for a key that has none (``[<flat index 0>]`` of a custom pytree node), kept as a
    key of that text.
    """
    text = path.removeprefix("result")
    keys: list[PathKey] = []
    i = 0
    while i < len(text):
        if text[i] == "[":
            close = _closing_bracket(text, i, path)
            if close == i + 1:
                raise ValueError(f"not a pytree path: {path!r}")
            keys.append(_subscript_key(text[i + 1 : close]))
            i = close + 1
        elif text[i] == ".":
            j = i + 1
            while j < len(text) and text[j] not in ".[":
                j += 1
            if not text[i + 1 : j].isidentifier():
                raise ValueError(f"not a pytree path: {path!r}")
            keys.append(("attr", text[i + 1 : j]))
            i = j
        else:
            raise ValueError(f"not a pytree path: {path!r}")
    return tuple(keys)


WHOLE_RESULT = "the whole result"
"""How the reports name the output whose path is empty (the function returns one array)."""


def shown_output_path(text: str) -> str:
    """The pytree path an output is shown with, from the words the reports show it in
    (``[0]['b'] (flat output 0) from opt_state['mu']['b']``, ``[1] (9 leaves: ...)``, ``the
    whole result``, ``output [1]``, ``result[1]``): what a user copies into ``--output-path``.
    ``ValueError`` where the words start with no path."""
    words = text.strip().removeprefix("output ").strip()
    if words.strip("()").startswith(WHOLE_RESULT):
        return ""
    end = len("result") if words.startswith("result") else 0
    while end < len(words) and words[end] in "[.":
        if words[end] == "[":
            end = _closing_bracket(words, end, text) + 1
        else:
            end += 1
            while end < len(words) and (words[end].isalnum() or words[end] == "_"):
                end += 1
    if end < len(words) and words[end] not in " ,":
        raise ValueError(f"not a pytree path: {text!r}")
    parse_output_path(words[:end])
    return words[:end].removeprefix("result")


def leaves_in_words(labels: Sequence[str], noun: str = "leaves") -> str:
    """Pytree leaves in a few words, however many: up to two as they are (``opt_state['mu']['w'],
    opt_state['nu']['w']``); more by what they share (``9 leaves of opt_state[0] (.count, .mu,
    .nu)``; ``noun="outputs"``: ``9 outputs under [1][0] (...)``), per argument name. A label is
    a name and a path (JAX's argument labels) or a path alone (an output's)."""
    labels = list(dict.fromkeys(labels))
    if len(labels) <= 2:
        return ", ".join(label or WHOLE_RESULT for label in labels)
    groups: dict[str, list[tuple[PathKey, ...]]] = {}
    for label in labels:
        name, keys = _split_label(label)
        groups.setdefault(name, []).append(keys)
    words = []
    for name, paths in groups.items():
        if len(paths) == 1:
            words.append(name + format_output_path(paths[0]))
            continue
        common = paths[0]
        for keys in paths[1:]:
            common = common[
                : next((i for i, (a, b) in enumerate(zip(common, keys)) if a != b), min(len(common), len(keys)))
            ]
        children = list(dict.fromkeys(keys[len(common)] for keys in paths if len(keys) > len(common)))
        at = name + format_output_path(common)
        named = ", ".join(format_output_path((child,)) for child in children) if 1 < len(children) <= 4 else ""
        if not at:  # outputs under no common sub-tree: by the sub-trees they are in
            words.append(f"{len(paths)} {noun}" + (f" under {named}" if named else ""))
            continue
        where = f" of {at}" if name else f" under {at}"
        words.append(f"{len(paths)} {noun}{where}" + (f" ({named})" if named else ""))
    return ", ".join(words)


def _split_label(label: str) -> tuple[str, tuple[PathKey, ...]]:
    """``opt_state[0].mu`` -> (``opt_state``, its keys); a label that is no path is a name."""
    end = 0
    while end < len(label) and (label[end].isalnum() or label[end] == "_"):
        end += 1
    try:
        return label[:end], parse_output_path(label[end:])
    except ValueError:
        return label, ()


def format_output_path(keys: Iterable[PathKey]) -> str:
    """The inverse of :func:`parse_output_path`: ``[0]['mu'].count``."""
    return "".join(f".{value}" if kind == "attr" else f"[{value!r}]" for kind, value in keys)


def _subscript_key(inner: str) -> PathKey:
    try:
        value = ast.literal_eval(inner)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return ("key", inner)
    return ("index", value) if isinstance(value, int) and not isinstance(value, bool) else ("key", value)


def _closing_bracket(text: str, start: int, path: str) -> int:
    """The ``]`` that closes ``text[start]``, past brackets inside quoted keys."""
    quote = None
    j = start + 1
    while j < len(text):
        ch = text[j]
        if quote:
            if ch == "\\":
                j += 1
            elif ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "]":
            return j
        j += 1
    raise ValueError(f"not a pytree path: {path!r}")


# ---------------------------------------------------------------------------------------
# JSON round-trip for the frozen dataclasses above
_Record = TypeVar("_Record", bound="DataclassInstance")


def _to_dict(value: Any) -> dict[str, Any]:
    """A dataclass instance as a JSON-ready dict."""
    encoded: dict[str, Any] = _to_jsonable(value)
    return encoded


def _to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_to_jsonable(v) for v in value]
    return value


def _from_jsonable(cls: type[_Record], data: dict[str, Any]) -> _Record:
    """The dataclass a JSON object describes; ``TypeError`` naming the field where a value has
    the wrong type (a corrupt or hand-edited report), so no wrong value travels further."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    kwargs = {}
    hints = _type_hints(cls)
    for name, value in data.items():
        if name not in hints:
            continue
        decoded = _decode_field(cls, name, value)
        if not _conforms(decoded, hints[name]):
            raise TypeError(f"{cls.__name__}.{name}: expected {_describe_hint(hints[name])}, got {value!r}")
        kwargs[name] = decoded
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a required field is missing
        raise TypeError(f"{cls.__name__}: {exc}") from None


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _conforms(value: Any, hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, arg) for arg in args)
    if origin is Literal:
        return value in args
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_conforms(item, args[0]) for item in value)
        return len(args) == len(value) and all(_conforms(item, arg) for item, arg in zip(value, args))
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(origin or hint, type):
        return isinstance(value, origin or hint)
    return True


def _describe_hint(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


_FIELD_TYPES: dict[tuple[str, str], tuple[type[DataclassInstance], bool]] = {}


def _decode_field(cls: type[DataclassInstance], name: str, value: Any) -> Any:
    kind = _FIELD_TYPES.get((cls.__name__, name))
    if kind is None or value is None:
        return _tupled(value)
    nested, many = kind
    if many:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{cls.__name__}.{name}: expected a list, got {value!r}")
        return tuple(_from_jsonable(nested, v) for v in value)
    return _from_jsonable(nested, value)


def _tupled(value: Any) -> Any:
    """JSON's lists as the tuples a frozen dataclass holds, nested ones too (a mesh's axes)."""
    return tuple(_tupled(item) for item in value) if isinstance(value, list) else value


_FIELD_TYPES.update(
    {
        ("Step", "span"): (Span, False),
        ("Origin", "span"): (Span, False),
        ("Origin", "sharding"): (Sharding, False),
        ("Diagnostic", "sharding"): (Sharding, False),
        ("OutputInfo", "sharding"): (Sharding, False),
        ("Diagnostic", "origin"): (Origin, False),
        ("Diagnostic", "trace"): (Step, True),
        ("Diagnostic", "span"): (Span, False),
        ("Diagnostic", "return_span"): (Span, False),
        ("Diagnostic", "fixes"): (FixOption, True),
        ("Diagnostic", "function"): (FunctionRef, False),
        ("Report", "diagnostics"): (Diagnostic, True),
        ("Report", "function"): (FunctionRef, False),
        ("Report", "outputs"): (OutputInfo, True),
        ("Report", "predicted"): (Prediction, False),
        ("Report", "xla"): (XlaVerdict, False),
        ("Report", "xla_accepted"): (XlaVerdict, False),
        ("XlaVerdict", "memory"): (MemoryFigures, False),
        ("FixMeasurement", "after"): (MemoryFigures, False),
        ("FixMeasurement", "before"): (MemoryFigures, False),
        ("FixMeasurement", "no_offload"): (MemoryFigures, False),
        ("MeasuredFix", "measured"): (FixMeasurement, True),
        ("MeasuredFix", "steps"): (StepMeasurement, True),
        ("StepMeasurement", "before"): (MemoryFigures, False),
        ("StepMeasurement", "after"): (MemoryFigures, False),
        ("MeasuredFix", "span"): (Span, False),
    }
)
