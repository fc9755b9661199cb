"""libtpu's names around a Pallas kernel: its call after the scope of its ``pallas_call``, and,
where the call carries the kernel's debug locations (JAX 0.12), its operands after the kernel's
arguments. Judged by the installed libtpu: error 1200 names the instruction the analysis names."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from offload_fixer import analyze, jax_compat
from offload_fixer.ir.kernel_names import Uniquer, call_name, sanitized
from offload_fixer.ir.locations import parse_location_array


def test_the_call_takes_the_scope_of_its_pallas_call():
    assert call_name("jit(step)/pallas_call") == "step"
    assert call_name("jit(<lambda>)/pallas_call") == "_lambda_"
    assert call_name("jit(step)/train/pallas_call") == "train"
    assert call_name("pallas_call") is None
    assert call_name(None) is None


def test_names_are_sanitized_and_made_unique_as_xla_does():
    assert sanitized("<lambda>") == "_lambda_"
    assert sanitized("0_layer") == "_0_layer"
    uniquer = Uniquer(["x_ref", "y.1"])
    assert [uniquer.unique("x_ref"), uniquer.unique("x_ref"), uniquer.unique("w_ref")] == [
        "x_ref.1",
        "x_ref.2",
        "w_ref",
    ]


def test_an_array_of_locations_is_read_element_by_element():
    found = parse_location_array('[loc(unknown), loc("x_ref"), loc("o_ref"), loc(unknown)]')
    assert [location.name for location in found] == [None, "x_ref", "o_ref", None]


def _kernel(x_ref, y_ref, o_ref):
    del x_ref, y_ref, o_ref  # the output is the aliased input, untouched


def _weights_kernel(weights, bias, out):
    del weights, bias, out


def _aliased(kernel, x, y, alias=0):
    from jax.experimental import pallas as pl

    anywhere = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[anywhere, anywhere],
        out_specs=anywhere,
        input_output_aliases={alias: 0},
    )(x, y)


def update_in_place(x, y):
    return _aliased(_kernel, x, y)


def update_weights(x, y):
    return _aliased(_weights_kernel, x, y)


def update_second(x, y):
    return _aliased(_kernel, y, x, alias=1)


def update_twice(x, y):
    """``x`` is the second operand of both kernels: the second renaming takes ``y_ref.1``."""
    return _aliased(_kernel, _aliased(_kernel, y, x), x, alias=1)


def offload_then_update(x, y):
    """A value moved to host inside the step, aliased by the kernel: error 1200 starts from
    the kernel's call, named after the step."""
    return _aliased(_kernel, jax.device_put(x * 2, jax_compat.memory_move_target("pinned_host")), y)


def _host_argument_name(kernel_argument: str) -> str:
    """What libtpu names the step's host argument ``x``, passed as ``kernel_argument``."""
    return kernel_argument if jax_compat.xla_generation().tpu_names_kernel_operands else "x.1"


@pytest.mark.parametrize(
    "step, host_argument, starts_from",
    [
        (update_in_place, True, lambda: _host_argument_name("x_ref")),
        (update_weights, True, lambda: _host_argument_name("weights")),
        (update_second, True, lambda: _host_argument_name("y_ref")),
        (update_twice, True, lambda: _host_argument_name("y_ref.1")),
        (offload_then_update, False, lambda: "offload_then_update"),
    ],
    ids=["parameter", "named-weights", "second-operand", "two-kernels", "moved-inside"],
)
@pytest.mark.skipif(
    not jax_compat.host_memory_on_this_backend(), reason="a kernel's host argument needs pinned_host memory"
)
def test_error_1200_names_what_the_analysis_names(step, host_argument, starts_from, tpu_compiler):
    """A host buffer a Pallas kernel updates in place, returned in device memory: libtpu
    refuses it (error 1200), and the instruction it starts from is the analysis's."""
    if not jax_compat.xla_generation().tpu_names_kernel_calls:
        pytest.skip(f"{jax_compat.xla_generation().name}: how libtpu names a kernel's call is not measured")
    mesh = jax.sharding.Mesh(jax.devices()[:1], ("x",))
    host = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(), memory_kind="pinned_host")
    device = host.with_memory_kind("device")
    x = jax.ShapeDtypeStruct((8, 128), jnp.float32, sharding=host if host_argument else device)
    y = jax.ShapeDtypeStruct((8, 128), jnp.float32, sharding=device)
    lowered = jax.jit(step).trace(x, y).lower(lowering_platforms=("tpu",))
    verdict = tpu_compiler.judge(lowered)
    report = analyze(lowered, "tpu")
    assert verdict.outcome == report.predicted.outcome == "rejected"
    assert "E1200" in verdict.message
    assert verdict.instruction == report.predicted.instruction == starts_from()
