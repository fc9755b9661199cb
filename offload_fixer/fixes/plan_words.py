"""The words of a fix plan: why a strategy was chosen (the rationale a fix shows), the notes
a plan carries, and the title of each edit (what it does and the line it goes on).

The planner (:mod:`offload_fixer.fixes.planner`) decides; this module only says it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from offload_fixer import jax_compat
from offload_fixer.codemods.eager_to_device import EagerTarget
from offload_fixer.codemods.host_output import HostOutputTarget
from offload_fixer.codemods.move_to_device import MoveToDeviceTarget
from offload_fixer.codemods.rename_checkpoint_name import RenameTarget
from offload_fixer.codemods.targets import Edit, FunctionTarget
from offload_fixer.model import Origin, Span, leaves_in_words

RATIONALE = {
    "move_to_host": (
        "host",
        (
            "your code moved this value to host on purpose (offloaded state): keep it there "
            "and declare the output as host memory"
        ),
    ),
    "host_argument": (
        "device",
        (
            "the argument is streamed from host by in_shardings: moving it to device where the function "
            "reads it fixes every output it reaches, and the state it becomes stays declared host memory"
        ),
    ),
    "offload_policy": (
        "device",
        (
            "these are residuals a remat offload policy put on host for the backward pass; "
            "returning them is incidental, so move them back to device"
        ),
    ),
    "host_compute": (
        "device",
        ("the value was computed on host (compute_on); return it in device memory like the function's other results"),
    ),
    None: ("device", "the origin of the host value is unknown: move it back to device where it is returned"),
}
COMPUTED_ON_RATIONALE = (
    "the offloaded value is computed on before it is returned, which XLA would run on the host CPU: "
    "move it back to device where it is computed on, so the result is a device value like the output"
)
STREAMED_PASS_THROUGH_RATIONALE = (
    "the streamed argument reaches the output without being computed on: declare that output host "
    "memory, so the state that enters as host leaves as host"
)
STREAMED_HOST_NOTE = (
    "declaring the outputs computed from a streamed argument host memory would leave that computation "
    "to the host CPU, which the released TPU compiler rejects or aborts on (libtpu 0.0.42.1 and 0.0.50.1: "
    "an async-start shape mismatch, a failed check in hlo_host_compute_alias_assigner; moved to device "
    "first, a donated device parameter declared host is an unimplemented HBM-to-HBM DMA); the argument is "
    "moved to device for the computation instead, and the state returned stays host memory"
)
NONE_LEAF_NOTE = (
    "JAX {version} (< 0.4.29): a None out_shardings leaf never inherits host memory, so the host "
    "output gets an explicit sharding; the other outputs keep None, which means what it meant before"
)

PART_WORDS = {
    "state": "keeping the returned state host memory",
    "declare": "declaring the output host memory",
    "pin": "spelling 'pinned_host'",
    "destination": "offloading to 'pinned_host'",
    "rename": "respelling the offloaded name as its tag",
    "move": "moving the value to device",
    "operand": "moving the operand to device",
    "eager": "moving the eager operand to device",
}
"""What a part of a plan does, for a rationale that says which part could not be made."""

STATE_UNDECIDED = (
    "cannot tell statically whether {outputs} is the updated host state or a new device value; "
    "`offload-fixer run --fix` sees the types"
)
STATE_LEFT_OUT = (
    "the returned host state cannot be declared host memory ({why}); the rest of the fix alone would "
    "return it in device memory"
)


def choose_strategy(
    origin: Origin | None, requested: str, spelling: jax_compat.Spelling, computed_on: bool = False
) -> tuple[str, str]:
    """(strategy, why) for a root cause. ``computed_on``: the host value goes through host
    compute before it is returned (host-compute steps, OFL1201/OFL1206)."""
    del spelling  # every version takes the same rule (see the README)
    kind = origin.kind if origin is not None else None
    if kind == "host_argument" and computed_on and requested != "device":
        return "device", RATIONALE["host_argument"][1] + ("" if requested == "auto" else f"; {STREAMED_HOST_NOTE}")
    if requested != "auto":
        return requested, f"strategy {requested} was requested"
    if kind == "host_argument":
        return "host", STREAMED_PASS_THROUGH_RATIONALE
    if kind == "move_to_host" and computed_on:
        return "device", COMPUTED_ON_RATIONALE
    return RATIONALE.get(kind, RATIONALE[None])


def placer(path: str, places: Mapping[str, Callable[[int], str]]) -> Callable[[int], str]:
    """How titles name a line of ``path``: ``line 12``; in a notebook, ``cell 3, line 2``."""
    if path in places:
        return places[path]
    from offload_fixer.notebook import is_notebook

    if not is_notebook(path):
        return lambda line: f"line {line}"
    from offload_fixer.notebook.positions import cell_span

    def in_cell(line: int) -> str:
        span = cell_span(Span(path, line))
        return f"cell {span.cell}, line {span.line}" if span is not None and span.cell is not None else f"line {line}"

    return in_cell


def title(part: str, t: FunctionTarget, edits: Sequence[Edit], place: Callable[[int], str]) -> str:
    """What the edit does and where it goes (the line of its first change), in one line however
    many outputs or leaves it edits (more than two are named by what they share: :func:`detail`
    names them); ``t``: the target of the codemod that makes it, which says which edit it is;
    ``edits``: those of the part's dry run, none for a display-only plan."""
    where = f" ({place(edits[0].line)})" if edits else ""
    if isinstance(t, EagerTarget):
        subject = edits[0].subject if edits else "the host array"
        return f"Move {subject} to device before the eager operation on it{where}"
    if isinstance(t, RenameTarget):
        tag = edits[0].subject if edits else "the name checkpoint_name tags"
        return f"Offload {tag}{where}, the name checkpoint_name tags"
    if not isinstance(t, HostOutputTarget) and part == "destination":
        return f"Offload to 'pinned_host' instead of device memory{where}, so the policy moves what it matches to host"
    if not isinstance(t, HostOutputTarget):
        return f"Use 'pinned_host' instead of 'unpinned_host'{where}, so the value is typed host memory"
    function = t.function_name.rsplit(".", 1)[-1] if t.function_name else "the function"
    outputs = _in_words([f"output {p}" if p else "the result" for p in t.output_paths])
    items = [item for e in edits if e.subject for item in _items(e.subject)]
    subjects = _in_words(items)
    them = "them" if len(items) > 1 else "it"
    if not isinstance(t, MoveToDeviceTarget):
        if part == "state":
            return f"Keep the returned state host memory{where}"
        return f"Declare {subjects or outputs} as {t.spelling.host_kind} memory in out_shardings{where}"
    if t.placement == "entry":
        if not edits or subjects.startswith("argument"):
            return f"Move argument {t.parameter} to device where {function} starts{where}"
        if subjects.startswith("each slice of"):  # in the body of the scan over the stack
            return f"Move {subjects} to device where the scan body starts{where}"
        return f"Move {subjects} to device before {function} reads {them}{where}"
    if t.placement == "operand":
        return f"Move {subjects or 'the offloaded value'} back to device where it is computed on{where}"
    if t.placement == "after_origin":
        return f"Move {subjects or 'the offloaded value'} back to device right after it is moved to host{where}"
    return f"Move {subjects or outputs} back to device where {function} returns {them}{where}"


def detail(part: str, t: FunctionTarget, edits: Sequence[Edit]) -> str:
    """What a part's title leaves to the body of the fix: the outputs the state part keeps host
    memory, and where, since its title names only the state."""
    if part != "state" or not isinstance(t, HostOutputTarget) or isinstance(t, MoveToDeviceTarget):
        return ""
    items = [item for e in edits if e.subject for item in _items(e.subject)]
    outputs = items or [f"output {p}" if p else "the result" for p in t.output_paths]
    if outputs == ["the result"]:  # the title says it all
        return ""
    return f"out_shardings keeps {_in_words(outputs)} host memory"


def _items(subject: str) -> list[str]:
    """An edit's subject (``output [1]['mu'], output [1]['nu']``), one item each: split at the
    commas between items, never inside a path's brackets or quotes."""
    items, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(subject):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0 and subject[i + 1 : i + 2] == " ":
            items.append(subject[start:i])
            start = i + 2
    return [*items, subject[start:]]


def _in_words(items: Sequence[str]) -> str:
    """Items of a title, however many: up to two as they are, more by what they share
    (``9 outputs under [1][0] (.count, .mu, .nu)``)."""
    items = list(dict.fromkeys(items))
    if len(items) <= 2:
        return ", ".join(items)
    if all(item.startswith("output ") for item in items):
        return leaves_in_words([item.removeprefix("output ") for item in items], noun="outputs")
    return leaves_in_words(items)


def joined_titles(titles: Sequence[str]) -> str:
    """The titles of a fix's parts as one: ``Move argument x to device where f starts (line 10);
    keep the state f returns host memory (line 13)``."""
    parts = list(dict.fromkeys(titles))
    return "; ".join([parts[0], *(part[:1].lower() + part[1:] for part in parts[1:])]) if parts else ""
