"""The static check: finds XLA error 1200 patterns in source with libcst, without running it.

Used by ``offload-fixer check``, pre-commit hooks, CI and the editor. It emits the same
:class:`offload_fixer.model.Diagnostic` as the dynamic analysis (``source="static"``), so the
fix planner applies to both. When a value flows through something it does not model it stays
silent: a missed finding is preferred to a false one.

    from offload_fixer.static import check_source, check_paths
    result = check_source(text, "train.py", target="tpu", jax_version="0.6.2")
    for result in check_paths(["src/"], jobs=4): ...

An editor keeps a :class:`SourceCache` per open document and passes it to every check of
that document (``check_source(text, path, cache=cache)``): only the top-level statements a
change touched are parsed again.

libcst is imported only when a file passes the prefilter, so start-up stays small.
"""

from .api import check_paths, check_source
from .outline import SourceCache
from .results import ParseError, StaticResult

__all__ = ["ParseError", "SourceCache", "StaticResult", "check_paths", "check_source"]
