"""Shared helpers: run the static check on a snippet under each regime's reference version."""

from __future__ import annotations

import textwrap

from offload_fixer.static import check_source

LEGACY, PROPAGATION, TYPED = "0.4.26", "0.6.2", "0.10.2"
FLOW_CODES = frozenset({"OFL1200", "OFL1204"})
"""What reaches an output; host compute on the way (OFL1201) has tests of its own."""
VERSIONS = (LEGACY, PROPAGATION, TYPED)

HEADER = """\
import functools
from functools import partial

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P, SingleDeviceSharding

mesh = jax.make_mesh((1,), ("x",))
host = NamedSharding(mesh, P(), memory_kind="pinned_host")
unpinned = NamedSharding(mesh, P(), memory_kind="unpinned_host")
dev = NamedSharding(mesh, P(), memory_kind="device")
"""


def program(body: str) -> str:
    return HEADER + textwrap.dedent(body)


def found(body: str, version: str, target: str = "tpu", header: bool = True) -> list[tuple[str, str]]:
    """``(code, output_path)`` of every diagnostic, sorted."""
    source = program(body) if header else textwrap.dedent(body)
    result = check_source(source, "prog.py", target=target, jax_version=version)
    assert result.parse_error is None, result.parse_error
    return sorted((d.code, d.output_path) for d in result.diagnostics if d.code in FLOW_CODES)


def verdicts(body: str, header: bool = True) -> tuple:
    """The findings under <=0.4.28, 0.4.29-0.7.0 and >=0.7.1, in that order."""
    return tuple(found(body, version, header=header) for version in VERSIONS)


def diagnostics(body: str, version: str = LEGACY, target: str = "tpu"):
    found = check_source(program(body), "prog.py", target=target, jax_version=version).diagnostics
    return tuple(d for d in found if d.code in FLOW_CODES)


def host_compute(body: str, version: str = TYPED, target: str = "tpu") -> list[tuple[int, str]]:
    """``(line, first operation)`` of each OFL1201, the line counted in ``body``."""
    found = check_source(program(body), "prog.py", target=target, jax_version=version).diagnostics
    offset = HEADER.count("\n")
    return sorted((d.span.line - offset, d.trace[1].op) for d in found if d.code == "OFL1201")


def flow(result) -> tuple:
    """A result's diagnostics of what reaches an output (:data:`FLOW_CODES`)."""
    return tuple(d for d in result.diagnostics if d.code in FLOW_CODES)
