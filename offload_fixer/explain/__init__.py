"""``offload-fixer explain``: read XLA's host-offload errors from a log, optionally with a dump.

``parse_error_log(text)`` finds the messages; ``explain(log_text, dump_dir, target)`` ties
each to the dumped module, output and source lines and runs the analysis on that module.
"""

from offload_fixer.explain.dump import (
    DumpedModule,
    DumpReadError,
    LoadedModule,
    OutputSlot,
    find_dumped_modules,
)
from offload_fixer.explain.explainer import ErrorMatch, Explanation, explain
from offload_fixer.explain.messages import (
    TracebackFrame,
    TraceStep,
    XlaError,
    parse_error_log,
    traceback_frames,
)

__all__ = [
    "DumpReadError",
    "DumpedModule",
    "ErrorMatch",
    "Explanation",
    "LoadedModule",
    "OutputSlot",
    "TraceStep",
    "TracebackFrame",
    "XlaError",
    "explain",
    "find_dumped_modules",
    "parse_error_log",
    "traceback_frames",
]
