"""OFL1209 donated-buffer-in-other-memory: an output reuses a donated argument's buffer that
lies in another memory than the output is declared in."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from offload_fixer import codes
from offload_fixer import xla_messages as msg
from offload_fixer.rules import FixDoc, Rule, TargetBehaviour
from offload_fixer.rules.examples import example
from offload_fixer.rules.ofl1204 import DMA_HBM_TO_HBM
from offload_fixer.rules.ofl1207 import backend_failure

if TYPE_CHECKING:
    from offload_fixer.analysis.backend import Backend
    from offload_fixer.analysis.offloader import Failure

DONATED_DEVICE_BUFFER = msg.XlaMessage(
    "tpu-donated-device-buffer",
    DMA_HBM_TO_HBM,
    codes.DONATED_BUFFER_IN_OTHER_MEMORY,
    status="FAILED_PRECONDITION",
)
"""libtpu: an output declared ``pinned_host`` that reuses a donated device argument's buffer."""
DONATED_HOST_BUFFER = msg.XlaMessage(
    "tpu-donated-host-buffer",
    "Unimplemented DMA from host to host.",
    codes.DONATED_BUFFER_IN_OTHER_MEMORY,
    status="FAILED_PRECONDITION",
)
"""libtpu: a device output that reuses a donated ``pinned_host`` argument's buffer."""
DEVICE_ARGUMENT_INTO_DONATED_HOST_BUFFER = msg.XlaMessage(
    "tpu-device-argument-into-donated-host-buffer",
    DMA_HBM_TO_HBM,
    codes.DONATED_BUFFER_IN_OTHER_MEMORY,
    status="FAILED_PRECONDITION",
)
"""libtpu: a device output that returns a device argument unchanged, in a donated
``pinned_host`` argument's buffer (JAX gives it that buffer where ``out_shardings`` leaves the
output's memory kind to it)."""
GPU_DONATED_DEVICE_BUFFER = msg.XlaMessage(
    "gpu-donated-device-buffer",
    "Copy-start %copy-start = (...) copy-start(...) doesn't have correct host memory space color S(5)",
    codes.DONATED_BUFFER_IN_OTHER_MEMORY,
    status="INTERNAL",
    stable="doesn't have correct host memory space color S(5)",
    variants=("has host memory space S(5) on both source and destination, which is unsupported",),
)
"""XLA:GPU: an output declared host memory that reuses a donated device argument's buffer
(jax-cuda12-plugin 0.10.2's wording; 0.12.0.1 says the copy has S(5) on both sides)."""

_INVALID = """
def write_block(cache, block, i):
    # The updated KV cache is declared host memory, but it reuses the donated device buffer.
    return lax.dynamic_update_slice(cache, block, (i, 0, 0))


f = jax.jit(
    write_block,
    in_shardings=($DEVICE_SHARDING, $DEVICE_SHARDING, None),
    out_shardings=$HOST_SHARDING,
    donate_argnums=0,
)
args = (jax.ShapeDtypeStruct((16, 8, 128), jnp.float32), jax.ShapeDtypeStruct((1, 8, 128), jnp.float32), 3)
"""

_VALID = """
def write_block(cache, block, i):
    # The cache lives in host memory on the way in too: the donated buffer is a host buffer.
    return lax.dynamic_update_slice(cache, block, (i, 0, 0))


f = jax.jit(
    write_block,
    in_shardings=($HOST_SHARDING, $DEVICE_SHARDING, None),
    out_shardings=$HOST_SHARDING,
    donate_argnums=0,
)
args = (jax.ShapeDtypeStruct((16, 8, 128), jnp.float32), jax.ShapeDtypeStruct((1, 8, 128), jnp.float32), 3)
"""

_WHY_DEVICE = (
    "The output is declared host memory, but JAX aliases it with a donated argument that lives "
    "in device memory, so XLA must write the host output into a device buffer: libtpu has no "
    "such copy (a DMA from HBM to HBM) and XLA:GPU's copy to host loses the host memory space. "
    "Declare the donated argument in the output's memory kind (keep the buffer on host), or "
    "do not donate it."
)
_WHY_HOST = (
    "The output is declared device memory, but JAX aliases it with a donated 'pinned_host' "
    "argument, so libtpu must return a device value in a host buffer through a DMA from host "
    "to host, which it does not implement. Declare the output 'pinned_host' too, or do not "
    "donate the argument."
)


_WHY_ARGUMENT = (
    "The output returns a device argument unchanged, but JAX gives it the buffer of a donated "
    "'pinned_host' argument of the same shape (an `out_shardings` leaf of None leaves the "
    "output's memory to JAX, which then matches donated buffers by shape alone), so libtpu must "
    "copy the argument into that buffer, which it does not implement. Declare every output's "
    "sharding, so that JAX gives the host buffer to the host output, or do not donate it."
)


def backend(b: Backend) -> Iterator[Failure]:
    """Outputs that reuse a donated argument's buffer in another memory than they are declared
    in (the ``donated_*`` probes). XLA:GPU keeps ``unpinned_host`` as host memory; libtpu, whose
    ``unpinned_host`` is S(6), fails on those as OFL1204 instead. An output a host value
    reaches fails first in the host offloader, with error 1200 (the catalogue's
    ``host_in_shardings_double_donated``, both compilers). A device output computed from a
    copy of a donated host value compiles on libtpu (the ``moments_on_host`` training package
    fixed by a move to device): only an update written into the donated buffer itself fails,
    or a device argument returned unchanged into it (the
    ``donated_host_state_aliased_to_device_argument_output`` probe; JAX's doing where an
    ``out_shardings`` leaf is ``None``)."""
    host_kinds, device_kinds = b.host_kinds(), b.device_kinds()
    reached = b.reached_outputs()
    for output in b.results:
        donor = b.aliased_outputs.get(output.index)
        if donor is None or output.index in reached:
            continue
        argument = b.args[donor].memory_kind
        if output.memory_kind in host_kinds and argument in device_kinds:
            message = GPU_DONATED_DEVICE_BUFFER if b.target == "gpu" else DONATED_DEVICE_BUFFER
            yield b.failure(None, None, message, parameter=donor)
        elif b.target == "tpu" and output.memory_kind in device_kinds and argument in host_kinds:
            if b.updated_in_place(output.index, donor):
                yield b.failure(None, None, DONATED_HOST_BUFFER, parameter=donor)
                continue
            returned = b.returned_argument(output.index)
            if returned is not None and b.args[returned].memory_kind in device_kinds:
                yield b.failure(None, None, DEVICE_ARGUMENT_INTO_DONATED_HOST_BUFFER, parameter=donor)


RULE = Rule(
    code=codes.DONATED_BUFFER_IN_OTHER_MEMORY,
    summary="An output reuses a donated buffer that lives in another memory",
    what_it_does=(
        "Reports an output that reuses a donated argument's buffer (`donate_argnums`) while "
        "the two are declared in different memories: a device argument aliased with a host "
        "output, or on TPU a `pinned_host` argument aliased with a device output."
    ),
    why_bad=(
        "A donated buffer is reused in place, so the output lives where the argument lives. "
        "When their memory kinds differ the compiler has to copy between the two inside one "
        "buffer, which neither released compiler builds: libtpu fails with `Unimplemented DMA "
        "from hbm to hbm` (or `from host to host`), XLA:GPU with an internal error on its copy "
        "to host. The typical case is a KV cache or optimizer state updated in place on "
        "device and declared host memory on the way out."
    ),
    targets={
        "tpu": TargetBehaviour(
            "error",
            "compilation fails (libtpu 0.0.42.1 and 0.0.50.1) for a device buffer returned as a "
            "'pinned_host' output and for a 'pinned_host' buffer returned as a device output",
            DONATED_DEVICE_BUFFER.placeholder(),
        ),
        "gpu": TargetBehaviour(
            "error",
            "compilation fails (jax-cuda12-plugin 0.10.2 and 0.12.0.1) for a device buffer returned "
            "as a host output; a host buffer returned as a device output compiles",
            GPU_DONATED_DEVICE_BUFFER.placeholder(),
        ),
    },
    fixes=(
        FixDoc(
            "host",
            "Declare the donated argument in the output's memory kind, or stop donating it",
            "display-only",
            "Moving the buffer changes where the caller keeps it between steps, and dropping the "
            "donation costs a second buffer; only the author knows which fits.",
        ),
    ),
    applies_to="JAX >= 0.7 with a released TPU or GPU compiler (measured with JAX 0.10.2 and 0.12.0.1)",
    invalid=(example(_INVALID),),
    valid=(example(_VALID),),
    failure_texts={
        DONATED_DEVICE_BUFFER: backend_failure(
            DONATED_DEVICE_BUFFER, "A host output reuses a donated device buffer", _WHY_DEVICE
        ),
        GPU_DONATED_DEVICE_BUFFER: backend_failure(
            GPU_DONATED_DEVICE_BUFFER, "A host output reuses a donated device buffer", _WHY_DEVICE
        ),
        DONATED_HOST_BUFFER: backend_failure(
            DONATED_HOST_BUFFER, "A device output reuses a donated host buffer", _WHY_HOST
        ),
        DEVICE_ARGUMENT_INTO_DONATED_HOST_BUFFER: backend_failure(
            DEVICE_ARGUMENT_INTO_DONATED_HOST_BUFFER,
            "A device argument is returned in a donated host buffer",
            _WHY_ARGUMENT,
        ),
    },
    failure_fix="host",
    backend=backend,
    backend_stage="entry",
)
