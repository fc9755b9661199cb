"""What ``run`` found in each compilation, kept between runs: a second run of an unchanged
program reads its reports instead of analysing (and, with ``--confirm``, compiling) again.

A pod program's checks are the expensive part of a run: the released compiler takes seconds
to minutes on a 256-chip module (``--confirm``), and a module of many layers takes the
analysis a while too. A report is kept under a key made of

- the lowered module's text, with its locations (every line of Python it names);
- the target, the pod's topology (``v5e:16x16`` times its slices) and whether the released
  compiler was asked (``--confirm``);
- the compilers involved: the installed JAX and jaxlib (whose rules and compiler generation
  the analysis models), the released compiler's package and version where it was asked, and
  this offload-fixer itself (each of its modules);
- the function the module was lowered from (its ``def`` and jit site) and the bytes of the
  files they are in, where a fix would be written.

Entries live in the project's cache folder (``.offload-fixer-cache/``, the static check's:
:class:`~offload_fixer.static.cache.ResultCache` makes the folder and writes each entry
whole through a temporary file, so concurrent runs each read a whole entry or none). An entry
that cannot be read is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from offload_fixer.model import FunctionRef, RematPolicy, Report

if TYPE_CHECKING:
    from offload_fixer.static.cache import ResultCache
    from offload_fixer.topology import Topology

FORMAT = 1
"""Bumped when an entry's layout changes."""


class VerdictCache:
    """Reports kept in one project's cache folder, with the hits and misses of this run."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        from offload_fixer.static.cache import ResultCache

        self.folder: ResultCache = ResultCache(root)
        self.hits = self.misses = 0
        self.seconds = 0.0
        """Time this run spent keying, reading and keeping entries (``-v`` says it)."""
        self._compilers: dict[tuple[str, bool], str] = {}

    def key(
        self,
        module: Any,
        target: str,
        topology: Topology | None,
        confirm: bool,
        function: FunctionRef | None,
        policies: Sequence[RematPolicy] = (),
    ) -> str:
        """What a report of ``module`` (a ``jax.stages.Lowered``, or its StableHLO text with
        locations) holds for, with the remat ``policies`` the traced program applies (a policy
        that offloads nothing leaves no trace in the module); see the module."""
        from offload_fixer.xla.oracle import module_text

        start = time.perf_counter()
        text = module_text(module)
        described = json.dumps(
            [
                FORMAT,
                target,
                topology.key() if topology is not None else None,
                confirm,
                self._compiler(target, confirm),
                None if function is None else [function.name, function.path, function.line, function.jit_path],
                [_file_digest(path) for path in _files_of(function)],
                [policy_record(policy) for policy in policies],
                self.folder.tool(),
            ],
            default=str,
        )
        digest = hashlib.sha256(described.encode("utf-8", "surrogateescape"))
        digest.update(text.encode("utf-8", "surrogateescape"))
        self.seconds += time.perf_counter() - start
        return digest.hexdigest()

    def get(self, key: str) -> Report | None:
        start = time.perf_counter()
        entry = self.folder.read(_entry_name(key))
        try:
            if not isinstance(entry, dict) or entry.get("key") != key:
                raise LookupError
            report = Report.from_dict(entry["report"])
        except (LookupError, TypeError, ValueError, AttributeError):
            self.misses += 1
            return None
        finally:
            self.seconds += time.perf_counter() - start
        self.hits += 1
        return report

    def put(self, key: str, report: Report) -> None:
        start = time.perf_counter()
        self.folder.keep(_entry_name(key), {"key": key, "report": report.to_dict()})
        self.seconds += time.perf_counter() - start

    def _compiler(self, target: str, confirm: bool) -> str:
        """The compilers a report depends on, read from package metadata once per run."""
        found = self._compilers.get((target, confirm))
        if found is None:
            from offload_fixer import jax_compat
            from offload_fixer.xla import installed

            released = installed(target) if confirm else None
            found = f"jax {jax_compat.installed_version()} jaxlib {jax_compat.installed_jaxlib_version()}" + (
                f" {released}" if released is not None else ""
            )
            self._compilers[(target, confirm)] = found
        return found


def _entry_name(key: str) -> str:
    return f"verdict-{key[:40]}.json"


def _files_of(function: FunctionRef | None) -> list[str]:
    if function is None:
        return []
    return sorted({path for path in (function.path, function.jit_path) if path})


def _file_digest(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def policy_record(policy: RematPolicy) -> Any:
    """A remat policy as the key holds it: every field (its place, what it offloads and matches)."""
    import dataclasses

    return dataclasses.asdict(policy)
