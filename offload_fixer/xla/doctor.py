"""``offload-fixer doctor``: what is installed, what can be confirmed, what the model was checked against."""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

from offload_fixer.model import TARGETS


@dataclass(frozen=True)
class TargetStatus:
    target: str
    compiler: str | None
    """The compiler that answered (``libtpu 0.0.42.1``), ``None`` when none could be asked."""
    problem: str = ""
    """Why ``--confirm`` cannot use it, with the install command where there is one."""


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def target_status(target: str) -> TargetStatus:
    """Start the target's compiler once: installed is not enough (a plugin may not load)."""
    from offload_fixer import xla

    try:
        judge = xla.oracle(target)
        judge.start()
    except xla.CompilerUnavailable as exc:
        return TargetStatus(target, None, str(exc))
    return TargetStatus(target, judge.compiler)


def report_lines() -> list[str]:
    from offload_fixer import jax_compat
    from offload_fixer.version import __version__

    lines = [
        f"offload-fixer {__version__}",
        f"python {platform.python_version()} ({sys.executable})",
        f"{jax_compat.describe_installed()}, jaxlib {_version('jaxlib') or 'not installed'}",
    ]
    for package in ("libtpu", "libtpu-nightly", "jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda13-plugin"):
        found = _version(package)
        if found:
            lines.append(f"{package} {found}")
    lines.append("")
    for target in TARGETS:
        status = target_status(target)
        if status.compiler:
            lines.append(f"--confirm --target {target}: yes, with {status.compiler}")
        else:
            lines.append(f"--confirm --target {target}: no — {status.problem}")
    generation = jax_compat.xla_generation()
    lines += ["", f"the analysis models: {generation.name}", "its verdicts were checked against:"]
    lines += [f"  {each.name}" for _, each in jax_compat.XLA_GENERATIONS]
    jaxlib = _version("jaxlib")
    for newer in generation.newer_compilers_loading:
        installed = f"libtpu {_version('libtpu')}" == newer
        lines.append(
            f"{newer} {'(installed) ' if installed else ''}also loads under jaxlib {jaxlib} and compiles "
            f"deviceless (measured); the analysis was checked against {generation.compiler('tpu')}"
        )
    return lines
