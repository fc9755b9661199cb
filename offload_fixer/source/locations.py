"""Turn a decoded MLIR location into the span of the user's own code."""

from __future__ import annotations

import linecache
import os
from functools import lru_cache

from offload_fixer.ir.locations import Frame, OpLocation
from offload_fixer.jax_compat import MEMORY_SPACE_APIS
from offload_fixer.model import PINNED_HOST, Span
from offload_fixer.source.lookup import is_interactive


@lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    """Frames inside these packages are JAX's, not the user's."""
    roots = []
    for name in ("jax", "jaxlib", "flax", "optax", "offload_fixer"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        if module.__file__ is not None:  # a namespace package has no file
            roots.append(os.path.dirname(os.path.abspath(module.__file__)) + os.sep)
    return tuple(roots)


def is_user_frame(frame: Frame) -> bool:
    """JAX labels the frames it records with their function; an unlabelled position outside a
    ``.py`` file is MLIR's own (``"-":5:11`` for a module parsed from text without locations).
    Modules rebuilt from HLO dumps keep unlabelled ``.py`` positions from the metadata.
    An IPython cell's ``<ipython-input-...>`` name is the user's code too."""
    if not frame.path or (frame.path.startswith("<") and not is_interactive(frame.path)):
        return False
    if frame.function is None and not frame.path.endswith(".py"):
        return False
    return not os.path.abspath(frame.path).startswith(_library_roots())


def user_span(location: OpLocation) -> Span | None:
    """The innermost frame in user code: the line the user wrote, not JAX's internals.

    JAX records Python's 0-based column offsets in MLIR locations; spans are 1-based like every
    other position the tool prints (and like the static check's), hence the ``+ 1``.
    """
    for frame in location.frames:
        if is_user_frame(frame):
            return Span(
                path=frame.path,
                line=frame.line,
                col=frame.col + 1,
                end_line=frame.end_line,
                end_col=frame.end_col + 1 if frame.end_col is not None else None,
                function=frame.function,
            )
    return None


def frame_path(location: OpLocation, function: str) -> str | None:
    """The file of the user frame running ``function`` (by its last qualified-name part),
    wherever it is on the op's call stack: a jitted step's ops often sit in helpers it calls."""
    for frame in location.frames:
        if frame.function and frame.function.rsplit(".", 1)[-1] == function and is_user_frame(frame):
            return frame.path
    return None


def output_path(result_info: str) -> str:
    """``jax.result_info`` (``result[0]['mu']``, ``result``, ``""``) -> keystr ``[0]['mu']``."""
    return result_info[len("result") :] if result_info.startswith("result") else result_info


MOVE_SPELLINGS = (
    "device_put",
    *(api.host.removeprefix("jax.memory.") for api in MEMORY_SPACE_APIS),
    "memory_kind",
    "TransferToMemoryKind",
    PINNED_HOST,
)


def written_as_move(span: Span) -> bool:
    """Whether the user's line spells a move (a remat policy's moves point at the ``vjp``/``grad``
    line instead, which is how its residual offloads are told apart from explicit ones)."""
    line = linecache.getline(span.path, span.line)
    return not line or any(word in line for word in MOVE_SPELLINGS)
