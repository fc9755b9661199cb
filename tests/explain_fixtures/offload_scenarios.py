"""Jitted functions that XLA rejects with error 1200 on TPU, lowered for TPU and compiled on
this machine's CPU backend so that XLA writes a real ``--xla_dump_to`` dump of them.

Run as a script with ``XLA_FLAGS=--xla_dump_to=DIR`` (and ``JAX_DUMP_IR_TO``); the CPU
compiler never raises error 1200, so every module is optimized and dumped. Which functions
are errors depends on how the installed JAX assigns output memory kinds, so the set is
chosen by regime. Each returning line carries a ``# returns: NAME`` marker for the tests.
The first function is compiled a second time for a new shape, as a retrace would: a later
module with the same instruction names.
"""

import jax
import jax.numpy as jnp

from offload_fixer import jax_compat


def typed_scenarios():
    """JAX >= 0.7.1: outputs follow memory types, so only the known gaps fail."""
    from jax.sharding import NamedSharding, SingleDeviceSharding
    from jax.sharding import PartitionSpec as P

    device = jax.devices()[0]
    host = NamedSharding(
        jax.sharding.Mesh([device], ("d",)), P(), memory_kind="pinned_host"
    )
    unpinned = SingleDeviceSharding(device, memory_kind="unpinned_host")
    pinned = SingleDeviceSharding(device, memory_kind="pinned_host")

    def stream_param(x):
        return x * 2, x + 1  # returns: stream_param

    def unpinned_pair(x):
        """Output 1 is the error; output 2 is a host output done right (``S(5)``)."""
        wrong, right = jax.device_put(x * 2, unpinned), jax.device_put(x * 3, pinned)
        return x + 1, wrong, right  # returns: unpinned_pair

    def unpinned_single(x):
        return jax.device_put(x * 2, unpinned)  # returns: unpinned_single

    return [
        jax.jit(unpinned_pair),
        jax.jit(stream_param, in_shardings=host),
        jax.jit(unpinned_single),
    ]


def propagation_scenarios():
    """JAX 0.4.29 - 0.7.0: host kinds survive device_put/scan/copy only."""
    from jax._src.sharding_impls import TransferToMemoryKind

    host = TransferToMemoryKind("pinned_host")

    def move_then_scale(x):
        y = jax.device_put(x * 2, host)
        return x + 1, y * 3  # returns: move_then_scale

    def carry_host(x):
        """The two carries swap places each step: JAX 0.6 forwards a carry that does not
        change out of the loop, which would keep its host kind."""
        h = jax.device_put(x, host)
        carried, _ = jax.lax.scan(lambda c, _: ((c[1], c[0]), None), (h, h), None, length=3)
        return carried[0]  # returns: carry_host

    return [jax.jit(move_then_scale), jax.jit(carry_host)]


def main() -> None:
    typed = jax_compat.regime() is jax_compat.Regime.TYPED
    scenarios = typed_scenarios() if typed else propagation_scenarios()
    for jitted in scenarios:
        compile_for_tpu(jitted, 8)
    compile_for_tpu(scenarios[0], 16)


def compile_for_tpu(jitted, size: int) -> None:
    spec = jax.ShapeDtypeStruct((size,), jnp.float32)
    try:
        jitted.trace(spec).lower(lowering_platforms=("tpu",)).compile()
    except jax.errors.JaxRuntimeError as exc:
        # The CPU compiler of JAX 0.5 - 0.7 has no host memory: it optimizes and dumps the
        # module, then finds no code to emit for the move to host. The dump is what is wanted.
        if "custom call to annotate_device_placement" not in str(exc):
            raise


if __name__ == "__main__":
    main()
