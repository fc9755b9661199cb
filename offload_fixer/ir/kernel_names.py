"""The names libtpu gives a Pallas (Mosaic) kernel's call and its operands, for a kernel whose
custom call carries its debug locations (``XlaGeneration.tpu_names_kernel_operands``).

JAX 0.12 lowers a Pallas TPU kernel to a ``tpu_custom_call`` whose backend config holds, beside
the kernel's body, its ``debug_locations``: a small MLIR module whose ``tpu.locs`` are the
body's locations, the kernel's argument names among them (``x_ref``, ``y_ref``, ``o_ref``).
libtpu 0.0.50.1 renames, early in its pipeline (before the host offloader, so in error 1200's
text), the instructions around such a call (measured with XLA's HLO dumps):

* the operand passed as the kernel's ``i``-th named argument: an entry parameter takes the
  argument's name (``x.1`` -> ``x_ref``), any other instruction gets it as a suffix
  (``device_put.3`` -> ``device_put.3.x_ref``). Arguments without a name (a grid's program
  ids) have no operand; a scalar-prefetch operand is the first named argument;
* the call itself takes the last scope of its op name, the one around ``pallas_call``
  (``jit(step)/pallas_call`` -> ``step``, ``jit(f)/train/pallas_call`` -> ``train``);

each name made unique as XLA's name uniquer does (``y_ref.1`` for a parameter two kernels
take). libtpu 0.0.42.1 rejects a backend config with debug locations, and JAX 0.10.2 writes
none: its kernels keep jaxlib's names.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable

from jaxlib.mlir import ir

from offload_fixer.ir import module as irm
from offload_fixer.ir.locations import parse_location_array

KERNEL_TARGET = "tpu_custom_call"
_LOCATIONS = "tpu.locs"
_JIT_SCOPE = re.compile(r"^jit\((.*)\)$")
_INVALID = re.compile(r"[^A-Za-z0-9_.\-]")


def argument_names(op: ir.Operation) -> list[str] | None:
    """The kernel's named arguments, in order, from the call's debug locations; None for a
    call that is no Mosaic kernel or carries none."""
    if irm.custom_call_target(op) != KERNEL_TARGET or "backend_config" not in op.attributes:
        return None
    try:
        config = json.loads(ir.StringAttr(op.attributes["backend_config"]).value)
        encoded = config["custom_call_config"]["debug_locations"]
        raw = base64.b64decode(encoded)
    except (ValueError, TypeError, KeyError, binascii.Error):
        return None
    context = ir.Context()
    context.allow_unregistered_dialects = True
    try:
        locations = ir.Module.parse(raw, context=context).operation.attributes[_LOCATIONS]
        found = parse_location_array(str(locations))
    except (ValueError, KeyError, IndexError, ir.MLIRError):
        return None
    return [location.name for location in found if location.name]


def call_name(op_name: str | None) -> str | None:
    """The name libtpu gives the kernel's call: the scope its op name puts ``pallas_call`` in."""
    scopes = (op_name or "").split("/")[:-1]
    if not scopes:
        return None
    scope = scopes[-1]
    jitted = _JIT_SCOPE.match(scope)
    return sanitized(jitted.group(1) if jitted else scope)


def sanitized(name: str) -> str:
    """XLA's ``NameUniquer::GetSanitizedName``: characters outside ``[A-Za-z0-9_.-]`` become
    ``_``, and a name that does not start with a letter or ``_`` gets one in front."""
    name = _INVALID.sub("_", name)
    return name if name[:1].isalpha() or name[:1] == "_" else f"_{name}"


class Uniquer:
    """XLA's name uniquer over a module's names: a name already taken gets the next free
    ``.N`` suffix."""

    def __init__(self, taken: Iterable[str]) -> None:
        self.taken = set(taken)

    def unique(self, name: str) -> str:
        found = name
        number = 0
        while found in self.taken:
            number += 1
            found = f"{name}.{number}"
        self.taken.add(found)
        return found
