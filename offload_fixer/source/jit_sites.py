"""Where a jitted function's options are written: the span a host-argument origin points at.

A module knows an argument arrived in host memory but not where the user said so; that is the
``in_shardings=`` of the function's jit site (decorator, ``jax.jit(f, ...)`` call or
``partial``), found with the same libcst source facts the fixes use.
"""

from __future__ import annotations

from functools import lru_cache

import libcst as cst

from offload_fixer.codemods.source_facts import JitSite, SourceFacts
from offload_fixer.model import FunctionRef, Span
from offload_fixer.source.decoding import SourceDecodeError, decode, libcst_view
from offload_fixer.source.lookup import source_bytes
from offload_fixer.source.metadata import node_positions


def in_shardings_span(function: FunctionRef) -> Span | None:
    """The ``in_shardings=`` argument of ``function``'s jit site, else the jit site itself."""
    if function.jit_path and function.jit_line:
        return _options_span(function.jit_path, function.name, imported_jit_sites(function.jit_path, function))
    if not function.path:
        return None
    facts = _facts(function.path, _mtime(function.path))
    if facts is None:
        return None
    info = facts.find_function(function.name, function.line, None)
    if info is None:
        return None
    return _options_span(function.path, function.name, (facts, facts.jit_sites(info)))


def imported_jit_sites(path: str, function: FunctionRef) -> tuple[SourceFacts, list[JitSite]] | None:
    """The jit call at ``function.jit_line`` of ``path`` that jits it by name, a function this
    file imports (``jax.jit(train_step, ...)`` in a package's ``__main__.py``)."""
    facts = _facts(path, _mtime(path))
    if facts is None or function.jit_line is None:
        return None
    return facts, facts.jit_sites_of_name(function.name, function.jit_line)


def _options_span(path: str, name: str, found: tuple[SourceFacts, list[JitSite]] | None) -> Span | None:
    if found is None:
        return None
    facts, sites = found
    for site in sites:
        node: cst.CSTNode = site.node
        if site.options is not None:
            for arg in site.options.args:
                if arg.keyword is not None and arg.keyword.value == "in_shardings":
                    node = arg
                    break
        where = facts.positions[node]
        return Span(path, where.start.line, where.start.column + 1, where.end.line, where.end.column + 1, name)
    return None


def _mtime(path: str) -> float:
    import os

    try:
        return os.stat(path).st_mtime
    except OSError:
        return -1.0


@lru_cache(maxsize=64)
def _facts(path: str, _mtime: float) -> SourceFacts | None:
    """Parsed once per file version: a run checks many functions of the same file (an
    IPython cell's name changes with its text)."""
    data = source_bytes(path)
    if data is None:
        return None
    try:
        module = cst.parse_module(libcst_view(decode(data)[0]))  # names as Python reads them: a code object's
    except (cst.ParserSyntaxError, SourceDecodeError):
        return None
    return SourceFacts.collect(module, node_positions(module))
