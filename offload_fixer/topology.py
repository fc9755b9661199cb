"""TPU pods by name: ``v5e-256``, ``v5e:16x16``, ``v4-1024``, ``v5p:4x4x8``, and several slices.

``run --topology`` and ``check(..., topology=)`` check a program for a pod it does not run
on: libtpu builds the pod's compile-only devices from a topology (its chip generation and the
chips along each dimension of a slice), :func:`offload_fixer.jax_compat.topology_devices`. This
module reads the names users write, as Cloud TPU's accelerator types and libtpu's topologies
spell them, into that topology. Nothing is imported.

Two spellings:

* ``GENERATION:AxB[xC]``: the chips along each dimension, as libtpu names a topology
  (``v5e:16x16``, ``v4:8x8x8``, ``v5p:4x4x8``).
* ``GENERATION-N``: Cloud TPU's accelerator type. ``N`` counts chips on v5e and v6e and
  TensorCores on v4 and v5p (two per chip: ``v4-1024`` is 512 chips). A power of two is laid
  out as Cloud TPU lays it out (``v5e-256`` is 16x16, ``v4-1024`` 8x8x8, ``v5p-256`` 4x4x8);
  another count must be written as a shape.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


class UnknownTopology(ValueError):
    """A topology name the tool cannot read (the CLI exits 2)."""


@dataclass(frozen=True)
class Generation:
    """A TPU chip generation: how its topologies and accelerator types are written."""

    name: str
    """libtpu's spelling in a topology name (``v5e``)."""
    dimensions: int
    """2 for a torus of chips in a plane (v5e, v6e), 3 for a cube (v4, v5p)."""
    cores_per_chip: int
    """What ``N`` of ``GENERATION-N`` counts per chip: TensorCores on v4 and v5p."""
    chip_config: str | None = None
    """libtpu's ``chip_config_name``: ``megacore`` makes one JAX device of a chip's two
    TensorCores, as on a real v4 or v5p (libtpu's default is a device per core on v4)."""


GENERATIONS: dict[str, Generation] = {
    "v4": Generation("v4", 3, 2, "megacore"),
    "v5p": Generation("v5p", 3, 2, "megacore"),
    "v5e": Generation("v5e", 2, 1),
    "v6e": Generation("v6e", 2, 1),
}
ALIASES = {"v5litepod": "v5e", "v5lite": "v5e", "v6lite": "v6e"}
"""Cloud TPU's other names for a generation (``v5litepod-256``)."""

_SHAPE = re.compile(r"(?P<generation>[a-z0-9]+):(?P<shape>\d+(?:x\d+)*)")
_ACCELERATOR = re.compile(r"(?P<generation>[a-z0-9]+)-(?P<count>\d+)")


@dataclass(frozen=True)
class Topology:
    """One or several slices of a TPU pod."""

    name: str
    """As the user wrote it: ``v5e-256``."""
    generation: Generation
    shape: tuple[int, ...]
    """Chips along each dimension of one slice: ``(16, 16)``."""
    num_slices: int = 1

    @property
    def libtpu_name(self) -> str:
        """``v5e:16x16``: the topology name libtpu builds devices from."""
        return f"{self.generation.name}:{'x'.join(map(str, self.shape))}"

    @property
    def chips(self) -> int:
        """Chips in all slices: the devices a program on the pod sees."""
        return math.prod(self.shape) * self.num_slices

    def __str__(self) -> str:
        return self.name if self.num_slices == 1 else f"{self.num_slices} slices of {self.name}"

    def key(self) -> str:
        """What a cached verdict is kept under: the layout, whatever it was called."""
        return f"{self.libtpu_name}*{self.num_slices}"


def parse_topology(text: str, num_slices: int = 1) -> Topology:
    """The pod ``text`` names, ``num_slices`` of it; raises :class:`UnknownTopology`."""
    written = text.strip()
    lowered = written.lower()
    if num_slices < 1:
        raise UnknownTopology(f"--num-slices must be 1 or more, not {num_slices}")
    shape_match = _SHAPE.fullmatch(lowered)
    accelerator_match = _ACCELERATOR.fullmatch(lowered)
    match = shape_match or accelerator_match
    if match is None:
        raise UnknownTopology(
            f"cannot read the topology {written!r}: write an accelerator type (v5e-256, v4-1024) or "
            "a generation and its chips along each dimension (v5e:16x16, v5p:4x4x8)"
        )
    generation = _generation(match["generation"], written)
    if shape_match is not None:
        shape = tuple(int(n) for n in shape_match["shape"].split("x"))
        if len(shape) != generation.dimensions or 0 in shape:
            example = "x".join(["4"] * generation.dimensions)
            raise UnknownTopology(
                f"a {generation.name} slice has {generation.dimensions} dimensions of chips "
                f"({generation.name}:{example}), not {written!r}"
            )
    else:
        shape = _accelerator_shape(generation, int(match["count"]), written)
    return Topology(written, generation, shape, num_slices)


def _generation(name: str, written: str) -> Generation:
    name = ALIASES.get(name, name)
    if name not in GENERATIONS:
        known = ", ".join(sorted(GENERATIONS))
        raise UnknownTopology(f"unknown TPU generation in {written!r}: offload-fixer knows {known}")
    return GENERATIONS[name]


def _accelerator_shape(generation: Generation, count: int, written: str) -> tuple[int, ...]:
    """Cloud TPU's layout of ``GENERATION-count``: the chips' power of two spread over the
    dimensions as evenly as it goes, the larger ones last (``v5e-128``: 8x16)."""
    chips, odd_cores = divmod(count, generation.cores_per_chip)
    exponent = chips.bit_length() - 1
    if odd_cores or chips < 1 or chips != 1 << exponent:
        example = "x".join(["4"] * generation.dimensions)
        raise UnknownTopology(
            f"{written} is not a power of two {'cores' if generation.cores_per_chip > 1 else 'chips'}: "
            f"write its layout ({generation.name}:{example} ...)"
        )
    if generation.dimensions == 3 and exponent == 2:
        return (2, 2, 1)  # Cloud TPU's smallest cube slice is a 2x2 plane (v4-8, v5p-8)
    base, extra = divmod(exponent, generation.dimensions)
    powers = [base] * (generation.dimensions - extra) + [base + 1] * extra
    return tuple(1 << p for p in powers)
