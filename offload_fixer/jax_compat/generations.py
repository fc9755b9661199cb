"""What each generation of released XLA compilers does where generations differ: one flag
per measured difference, and the table of generations by the jaxlib release they ship with.
Measured with ``scripts/fidelity.py`` and the probes (``docs/xla-host-offloader.md``);
:func:`offload_fixer.jax_compat.xla_generation` picks the installed one."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["XLA_GENERATIONS", "XlaGeneration"]


@dataclass(frozen=True)
class XlaGeneration:
    """What one generation of released compilers does where generations differ (measured with
    ``scripts/fidelity.py`` on the compilers each JAX release installs: ``docs/xla-host-offloader.md``)."""

    name: str
    slice_to_output_is_dma: bool
    """A slice of a host value that reaches an output becomes a copy to device (not host compute)."""
    tpu_unpinned_output_from_device_fails: bool
    """libtpu cannot copy a device value into an ``unpinned_host`` output ('DMA from hbm to hbm';
    libtpu 0.0.42.1). libtpu 0.0.17.1 has no such output: ``tpu_unpinned_host_is_host_memory``."""
    while_condition_on_host_aborts: bool
    """When the host offloader's walk reaches the root of a loop's condition (the condition is
    computed from a host value: a host entry parameter carried through the loop or closed
    over, or a value moved to host), the compilers fail a CHECK and the compiling process
    aborts: libtpu 0.0.42.1 and jax-cuda12-plugin 0.10.2 ('Check failed: !tmp_shape_index.empty()
    Expected shape index to be non-empty'), libtpu 0.0.17.1 of JAX 0.6.2 with another CHECK
    ('Check failed: shape->has_layout() Instruction's shape has no layout: %while...'). From
    jaxlib 0.12 (libtpu 0.0.50.1, jax-cuda12-plugin 0.12.0.1) the walk goes on from the whole
    loop instead, every result of it in host memory: error 1200 where a loop result reaches a
    device output, else the backend fails to build the host loop (libtpu: 'Shape mismatch
    between parameter number 0 and its operand in %...fusion', a body fusion reading an S(5)
    operand; XLA:GPU: 'Expected instruction to have shape equal to (f32[], ...), actual shape is
    (f32[]{:S(5)}, ...)' on the while); an update written into a host buffer the loop carries
    is still rejected by the buffer's condition check first (``WHILE_CONDITION_COMPUTE``)."""
    inlines_shard_map_body: bool
    """XLA's call inliner inlines a shard_map body called by name (``shmap_body``) before the
    host offloader runs (libtpu 0.0.17.1); later generations keep it as a call, so a move to
    host inside it is not the entry's root."""
    tpu_async_slice_one_dimension_only: bool = False
    """libtpu copies a slice of a host value to device as an async slice that may slice one
    dimension only ('Async slice only supports slicing in 1 dimension'; libtpu 0.0.17.1 and
    0.0.42.1). libtpu 0.0.50.1 and the CUDA plugins compile such slices. The same holds for an
    update written from device into a host buffer (an async dynamic-update-slice)."""
    tpu_async_update_lane_slice_fails: bool = False
    """libtpu's async dynamic-update-slice into a host buffer cannot write part of the lane
    (last) dimension ('Lane slice updating is not supported in async dynamic update slice
    yet'; libtpu 0.0.17.1 and 0.0.42.1)."""
    slice_to_single_output_is_dma: bool = False
    """Where ``slice_to_output_is_dma`` does not hold: a slice of a host value that is the
    entry's only output (not an element of a tuple of outputs) still becomes a copy to device
    (libtpu 0.0.17.1: the ``slice_returned`` and ``dynamic_slice_returned`` probes compile,
    ``slice_in_tuple`` is error 1200)."""
    parameter_names_from_locations: bool = True
    """jaxlib's translation to HLO names an entry parameter after its location (``w.1`` for
    the argument ``w``), as XLA's messages then do; jaxlib 0.6.2's names it by position
    (``Arg_0.1``). The analysis names instructions with the installed jaxlib's own
    translation (``ir.hlo_names``), so this says only what a generation's messages read."""
    tpu_unpinned_host_is_host_memory: bool = False
    """libtpu lays out ``unpinned_host`` entry parameters and outputs in host memory (S(5)),
    as ``pinned_host`` ones, so its compiled outputs are ``pinned_host`` (libtpu 0.0.17.1: the
    ``root_unpinned_move``, ``unpinned_argument_*``, ``*_to_unpinned_output`` probes). Later
    ones put them in S(6), which the host offloader does not take for host memory."""
    tpu_builds_host_gather: bool = False
    """libtpu builds a gather in host memory as host compute (libtpu 0.0.17.1, the
    ``gather_on_host`` probe); later ones emit it as a custom fusion without a backend config
    and fail."""
    tpu_lane_slice_multiple_of_lane_count: bool = False
    """libtpu copies part of the lane dimension between host and device only in multiples of
    128 lanes: an update into a host buffer, or a slice copied to device that also slices the
    sublane (second-to-last) dimension ('Slicing lane dimension is only supported when the
    lane slice size is a multiple of LaneCount'; libtpu 0.0.50.1)."""
    tpu_gathers_host_shards_by_updates: bool = False
    """libtpu gathers the shards of a value split over more devices than the host output it is
    returned in by writing each shard into the host buffer (an async dynamic-update-slice per
    shard), which fails where a shard of a 1-D output is not whole 128-lane tiles (libtpu 0.0.42.1
    and 0.0.50.1, the ``lane_gather_*`` probes); libtpu 0.0.17.1 compiles these."""
    custom_call_alias_reaches_every_result: bool = False
    """A value a custom call aliases into one result of several (a Pallas kernel's output tuple,
    ``input_output_aliases``) reaches every result: XLA follows the call with the operand's
    shape index, and at the element reads of its tuple it follows each (libtpu 0.0.50.1: error
    1200 where only the other result is returned). libtpu 0.0.42.1 fails a CHECK there
    instead and the compiling process aborts (``host_offload_utils.cc:98``
    ``!tmp_shape_index.empty()``; ``host_offloader.cc:343`` ``output_shape.has_layout()`` where
    the whole tuple is returned), which ``--confirm`` quotes; the analysis predicts error 1200
    for the aliased result there."""
    tpu_custom_call_tuple_alias_aborts: bool = False
    """Where a custom call aliases a host value into one of its several results, the host
    offloader fails a CHECK and the compiling process aborts (libtpu 0.0.42.1 on the six
    ``OFL1216`` kernels: ``host_offload_utils.cc:98`` ``!tmp_shape_index.empty()`` where an
    element of the call's tuple is read, ``host_offloader.cc:343`` ``output_shape.has_layout()``
    where the whole tuple is returned), whichever results are returned and in whichever memory.
    libtpu 0.0.50.1 rejects the same programs with error 1200 instead
    (``custom_call_alias_reaches_every_result``); libtpu 0.0.17.1 is unmeasured (JAX 0.6.2's
    CPU has no ``pinned_host`` to trace a kernel's host argument with)."""
    tpu_names_kernel_calls: bool = False
    """libtpu renames a Pallas kernel's call after the scope of its ``pallas_call``
    (``jit(step)/pallas_call`` -> ``step``; ``ir.kernel_names``), the name error 1200 gives a
    host value the kernel returns (libtpu 0.0.42.1 and 0.0.50.1; 0.0.17.1 not measured: JAX
    0.6.2's CPU backend has no ``pinned_host`` to trace such a kernel's host argument)."""
    tpu_names_kernel_operands: bool = False
    """libtpu also renames the kernel's operands after its arguments where the call carries the
    kernel's debug locations, which JAX 0.12 writes (libtpu 0.0.50.1: error 1200 starts from
    ``x_ref``, the kernel's argument, not the parameter ``x.1``). libtpu 0.0.42.1 rejects such a
    call's backend config, and JAX 0.10.2 writes no debug locations."""

    newer_compilers_loading: tuple[str, ...] = ()
    """Released compilers newer than this generation's that were measured to load under its
    jaxlib and compile deviceless (``libtpu 0.0.51`` under jaxlib 0.12.0.1): usable for
    ``--confirm``, though the analysis was checked against this generation's own."""

    def compiler(self, target: str) -> str | None:
        """The released compiler of ``target`` this generation was measured on (``libtpu
        0.0.17.1``), or ``None``: JAX 0.6.2's generation has no CUDA plugin measured."""
        wanted = "libtpu " if target == "tpu" else "jax-cuda"
        compilers = self.name.split(" (")[0].split(" / ")
        return next((name for name in compilers if name.startswith(wanted)), None)


XLA_GENERATIONS: tuple[tuple[tuple[int, int, int], XlaGeneration], ...] = (
    (
        (0, 7, 0),
        XlaGeneration(
            "libtpu 0.0.17.1 (jax 0.6.2)",
            slice_to_output_is_dma=False,
            tpu_unpinned_output_from_device_fails=False,
            while_condition_on_host_aborts=True,
            inlines_shard_map_body=True,
            tpu_async_slice_one_dimension_only=True,
            tpu_async_update_lane_slice_fails=True,
            slice_to_single_output_is_dma=True,
            tpu_builds_host_gather=True,
            tpu_unpinned_host_is_host_memory=True,
            parameter_names_from_locations=False,
        ),
    ),
    (
        (0, 12, 0),
        XlaGeneration(
            "libtpu 0.0.42.1 / jax-cuda12-plugin 0.10.2 (jax 0.10.2)",
            slice_to_output_is_dma=True,
            tpu_unpinned_output_from_device_fails=True,
            while_condition_on_host_aborts=True,
            inlines_shard_map_body=False,
            tpu_async_slice_one_dimension_only=True,
            tpu_async_update_lane_slice_fails=True,
            tpu_gathers_host_shards_by_updates=True,
            tpu_custom_call_tuple_alias_aborts=True,
            tpu_names_kernel_calls=True,
        ),
    ),
    (
        (99, 0, 0),
        XlaGeneration(
            "libtpu 0.0.50.1 / jax-cuda12-plugin 0.12.0.1 (jax 0.12.0.1)",
            slice_to_output_is_dma=True,
            tpu_unpinned_output_from_device_fails=False,
            while_condition_on_host_aborts=False,
            inlines_shard_map_body=False,
            tpu_lane_slice_multiple_of_lane_count=True,
            tpu_gathers_host_shards_by_updates=True,
            custom_call_alias_reaches_every_result=True,
            tpu_names_kernel_calls=True,
            tpu_names_kernel_operands=True,
            newer_compilers_loading=("libtpu 0.0.51",),
        ),
    ),
)
"""Generations by the jaxlib release they ship with (the first jaxlib *not* in each): ``jax[tpu]``
pins the libtpu of its release and the CUDA plugin is versioned with jaxlib, so the installed
jaxlib tells which compilers a program will meet."""
