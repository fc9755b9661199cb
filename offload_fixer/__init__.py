"""offload-fixer: predict and fix JAX host-offload outputs that XLA rejects (error 1200).

Imports are lazy so that ``offload-fixer check`` and the language server start fast.
"""

from __future__ import annotations

from typing import Any

from offload_fixer.model import Diagnostic, FunctionRef, Origin, Report, Span, Step
from offload_fixer.version import __version__

__all__ = ["Diagnostic", "FunctionRef", "Origin", "Report", "Span", "Step", "__version__", "analyze", "check", "pod"]


def analyze(source: Any, target: str = "tpu", **kwargs: Any) -> Report:
    """See :func:`offload_fixer.analysis.analyze`."""
    from offload_fixer.analysis import analyze as _analyze

    return _analyze(source, target, **kwargs)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext offload_fixer``: check every new jit compilation of the kernel, showing each
    finding under the cell that caused it (see :mod:`offload_fixer.notebook.extension`)."""
    from offload_fixer.notebook.extension import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from offload_fixer.notebook.extension import unload_ipython_extension as unload

    unload(ipython)


def __getattr__(name: str) -> Any:
    if name in ("check", "pod"):
        from offload_fixer import api

        return getattr(api, name)
    raise AttributeError(name)
