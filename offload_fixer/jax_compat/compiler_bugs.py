"""Offload bugs of the released compilers: failures of correct programs that a later release
of the same compiler compiles, keyed by the compiler's version.

A finding whose XLA failure is one of these is not the user's mistake: the tool says which
release fixes it and which JAX installs that release, and edits nothing unless the user asks
for the workaround (``--strategy workaround``). Every entry was measured: its probe
(``tests/xla/probes.py``) fails on each release in ``measured_failing`` and compiles on
``fixed_in`` (``tests/jax_compat/test_compiler_bugs.py`` holds it to the installed compilers);
nothing is entered from a report alone. Which compiler a user's program meets is the one
installed, else the one ``jax[tpu]`` pins for the installed jaxlib (:data:`LIBTPU_OF_JAXLIB`).
"""

from __future__ import annotations

from dataclasses import dataclass

from offload_fixer import installed

__all__ = ["COMPILER_BUGS", "LIBTPU_OF_JAXLIB", "CompilerBug", "compiler_release", "known_bug"]

Release = tuple[int, ...]

LIBTPU_OF_JAXLIB: dict[str, str] = {
    "0.6.2": "0.0.17.1",
    "0.7.0": "0.0.19.1",
    "0.7.1": "0.0.20",
    "0.7.2": "0.0.23",
    "0.8.0": "0.0.24",
    "0.8.1": "0.0.30",
    "0.8.2": "0.0.32.1",
    "0.9.0": "0.0.34",
    "0.9.1": "0.0.35",
    "0.9.2": "0.0.37",
    "0.10.0": "0.0.40",
    "0.10.1": "0.0.41",
    "0.10.2": "0.0.42.1",
    "0.11.0": "0.0.44.1",
    "0.11.1": "0.0.46.3",
    "0.11.2": "0.0.48.1",
    "0.12.0": "0.0.50.1",
    "0.12.0.1": "0.0.50.1",
}
"""The libtpu that ``jax[tpu]==X`` installs, by JAX (and jaxlib) release X, as the package
registry resolves it: what a TPU job of that JAX compiles with."""

PACKAGES = {"tpu": "libtpu", "gpu": "jax-cuda12-plugin"}
"""The distribution of each target's released compiler (the CUDA plugin is versioned with jaxlib)."""


def _release(text: str) -> Release:
    """``"0.0.46.3"`` -> ``(0, 0, 46, 3)``; a part's suffix (``rc1``, ``dev2026``) is dropped."""
    numbers = []
    for part in text.split("."):
        digits = part[: len(part) - len(part.lstrip("0123456789"))]
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


@dataclass(frozen=True)
class CompilerBug:
    """One offload bug of a released compiler, with the release that fixes it."""

    failure: str
    """The kind of XLA failure it shows as (``xla_messages.XlaMessage.kind``): the finding it matches."""
    target: str
    measured_failing: tuple[str, ...]
    """The releases measured to fail the probe, oldest first; those between the first and
    ``fixed_in`` are taken to have the bug too."""
    fixed_in: str
    """The first release measured to compile the probe."""
    probe: str
    """The program of ``tests/xla/probes.py`` that shows it."""
    reference: str
    """The XLA issue or pull request, or why there is none."""
    failures_seen: tuple[str, ...] = ()
    """What the failing releases say, where one says otherwise than the finding's text."""

    @property
    def package(self) -> str:
        return PACKAGES[self.target]

    def affects(self, release: str) -> bool:
        return _release(self.measured_failing[0]) <= _release(release) < _release(self.fixed_in)

    @property
    def fixing_jax(self) -> str | None:
        """The first JAX release whose ``jax[tpu]`` installs the fix (``None``: none pins it yet)."""
        if self.target != "tpu":
            return self.fixed_in
        fixed = _release(self.fixed_in)
        return next((jax for jax, libtpu in LIBTPU_OF_JAXLIB.items() if _release(libtpu) >= fixed), None)

    def summary(self, release: str) -> str:
        """``a bug of libtpu 0.0.42.1, fixed in 0.0.46.3: upgrade JAX to 0.11.1``."""
        upgrade = f"upgrade JAX to {self.fixing_jax}" if self.fixing_jax else f"upgrade {self.package}"
        return f"a bug of {self.package} {release}, fixed in {self.fixed_in}: {upgrade}"


COMPILER_BUGS: tuple[CompilerBug, ...] = (
    CompilerBug(
        failure="tpu-async-slice-dimensions",
        target="tpu",
        measured_failing=("0.0.17.1", "0.0.42.1", "0.0.44.1"),
        fixed_in="0.0.46.3",
        probe="slice_two_dimensions",
        reference=(
            "no public XLA issue or pull request (libtpu's TPU backend is not open source): "
            "measured with the slice_two_dimensions probe on libtpu 0.0.17.1, 0.0.42.1, 0.0.44.1, "
            "0.0.46.3, 0.0.48.1 and 0.0.50.1"
        ),
        failures_seen=("0.0.44.1: UNIMPLEMENTED: Multiple major dimensions sliced",),
    ),
    CompilerBug(
        failure="tpu-unpinned-output",
        target="tpu",
        measured_failing=("0.0.42.1", "0.0.44.1", "0.0.46.3", "0.0.48.1"),
        fixed_in="0.0.50.1",
        probe="device_value_to_unpinned_output",
        reference=(
            "no public XLA issue or pull request (libtpu's TPU backend is not open source): "
            "measured with the device_value_to_unpinned_output probe on libtpu 0.0.42.1, 0.0.44.1, "
            "0.0.46.3, 0.0.48.1 and 0.0.50.1"
        ),
        failures_seen=(
            "0.0.44.1 to 0.0.48.1 abort: lowering_util.cc Check failed: "
            "source->memory_space() != MemorySpace::kHost (host vs. host)",
        ),
    ),
)
"""Every measured offload bug of a released compiler. libtpu 0.0.17.1 lays ``unpinned_host``
outputs out in host memory (``XlaGeneration.tpu_unpinned_host_is_host_memory``), so the second
has no failure there."""


def compiler_release(target: str) -> str | None:
    """The release of ``target``'s compiler a program meets: the installed one, else for TPU the
    libtpu ``jax[tpu]`` pins for the installed jaxlib, for GPU the plugin of the jaxlib's
    release; ``None`` where neither is known."""
    found = installed.version(PACKAGES[target])
    if found is not None:
        return found
    jaxlib = installed.version("jaxlib")
    if jaxlib is None:
        return None
    return LIBTPU_OF_JAXLIB.get(jaxlib) if target == "tpu" else jaxlib


def known_bug(failure: str, target: str, release: str | None) -> CompilerBug | None:
    """The entry a failure of ``target``'s compiler at ``release`` is, if any."""
    if release is None:
        return None
    return next(
        (bug for bug in COMPILER_BUGS if bug.failure == failure and bug.target == target and bug.affects(release)),
        None,
    )
