"""``offload_fixer.check``: lower one function for an accelerator on this (CPU) machine."""

from __future__ import annotations

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

import offload_fixer
from offload_fixer import jax_compat
from offload_fixer.api import check, function_ref

DEVICE = jax.devices()[0]

if jax_compat.spelling().transfer_to_memory_kind:  # the result of jnp.sin loses the memory kind
    from jax._src.sharding_impls import TransferToMemoryKind

    TO_HOST = TransferToMemoryKind("pinned_host")
else:  # JAX 0.7.1+: typed as device memory while XLA moves it to host
    TO_HOST = SingleDeviceSharding(DEVICE, memory_kind="unpinned_host")

needs_pinned_host = pytest.mark.skipif(
    not jax_compat.host_memory_on_this_backend(),
    reason=f"the CPU backend of jax {jax.__version__} has no pinned_host memory to build host shardings with",
)
needs_typed_memory = pytest.mark.skipif(
    jax_compat.regime() is not jax_compat.Regime.TYPED,
    reason="memory space is part of the type only from jax 0.7.1",
)


def def_line(fn) -> int:
    lines, start = inspect.getsourcelines(inspect.unwrap(fn))
    return start + next(i for i, text in enumerate(lines) if text.lstrip().startswith("def "))


def sin_on_host(x):
    on_host = jax.device_put(x, TO_HOST)
    return jnp.sin(on_host)


MOVE_LINE = def_line(sin_on_host) + 1


def maybe_offload(x, offload):
    if offload:
        x = jax.device_put(x, TO_HOST)
    return jnp.sin(x)


def double(x):
    return x * 2


def host_errors(report):
    return report.by_code("OFL1200")


def test_plain_function_with_a_move_to_host() -> None:
    report = check(sin_on_host, np.ones(8, np.float32))
    (error,) = host_errors(report)
    assert error.severity == "error" and error.target == "tpu"
    assert error.origin.kind == "move_to_host"
    assert (error.origin.span.path, error.origin.span.line) == (__file__, MOVE_LINE)
    assert error.output_path == ""
    assert error.function == offload_fixer.FunctionRef("sin_on_host", __file__, def_line(sin_on_host))


def test_move_in_a_function_named_offload_is_a_move_to_host() -> None:
    def offload_activations(x):
        return jnp.sin(jax.device_put(x, TO_HOST))

    (error,) = host_errors(check(offload_activations, jnp.ones(8)))
    assert error.origin.kind == "move_to_host"


def test_jitted_function_with_jax_arrays_and_the_package_level_export() -> None:
    report = offload_fixer.check(jax.jit(sin_on_host), jnp.ones(8))
    assert [d.output_path for d in host_errors(report)] == [""]
    assert report.function.name == "sin_on_host"


def test_gpu_target_fails_like_tpu() -> None:
    (finding,) = host_errors(check(sin_on_host, jnp.ones(8), target="gpu"))
    assert finding.severity == "error" and finding.target == "gpu"


def test_static_argnums_are_respected() -> None:
    jitted = jax.jit(maybe_offload, static_argnums=1)
    assert len(host_errors(check(jitted, jnp.ones(8), True))) == 1
    assert host_errors(check(jitted, jnp.ones(8), False)) == ()
    keyword = jax.jit(maybe_offload, static_argnames="offload")
    assert len(host_errors(check(keyword, jnp.ones(8), offload=True))) == 1


def test_decorated_function_points_at_its_def_line() -> None:
    @functools.partial(
        jax.jit,
        static_argnums=1,
    )
    def decorated(x, offload):
        return maybe_offload(x, offload)

    ref = function_ref(decorated)
    assert (ref.name, ref.path, ref.line) == (
        "decorated",
        __file__,
        def_line(decorated),
    )
    (error,) = host_errors(check(decorated, jax.ShapeDtypeStruct((8,), jnp.float32), True))
    assert error.function == ref


@needs_pinned_host
def test_in_shardings_host_with_shape_dtype_structs() -> None:
    mesh = Mesh(jax.devices(), ("data",))
    on_host = NamedSharding(mesh, PartitionSpec(), memory_kind="pinned_host")
    jitted = jax.jit(double, in_shardings=(on_host,), donate_argnums=0)
    jit_line = inspect.currentframe().f_lineno - 1
    (error,) = host_errors(check(jitted, jax.ShapeDtypeStruct((8,), jnp.float32)))
    # the origin is where the user declared the argument host memory: the in_shardings= keyword
    assert error.origin.kind == "host_argument"
    assert (error.origin.span.path, error.origin.span.line) == (__file__, jit_line)
    assert error.output_path == ""
    assert error.function == offload_fixer.FunctionRef("double", __file__, def_line(double))
    # NumPy arguments stream in through in_shardings just the same
    assert len(host_errors(check(jitted, np.ones(8, np.float32)))) == 1
    # declaring the output host memory is the other fix: out_shardings are respected
    streamed = jax.jit(double, in_shardings=(on_host,), out_shardings=on_host)
    report = check(streamed, jax.ShapeDtypeStruct((8,), jnp.float32))
    assert host_errors(report) == () and [o.verdict for o in report.outputs] == ["streamed"]


@needs_pinned_host
@needs_typed_memory
def test_host_named_sharding_on_the_shape_dtype_struct_types_the_argument_host() -> None:
    on_host = NamedSharding(Mesh(jax.devices(), ("data",)), PartitionSpec(), memory_kind="pinned_host")
    jitted = jax.jit(double, in_shardings=(on_host,))
    report = check(jitted, jax.ShapeDtypeStruct((8,), jnp.float32, sharding=on_host))
    assert host_errors(report) == () and [o.verdict for o in report.outputs] == ["streamed"]


@needs_pinned_host
@needs_typed_memory
def test_plain_function_with_a_host_single_device_shape_dtype_struct() -> None:
    argument = jax.ShapeDtypeStruct(
        (8,),
        jnp.float32,
        sharding=SingleDeviceSharding(DEVICE, memory_kind="pinned_host"),
    )
    (error,) = host_errors(check(double, argument))
    assert error.origin.kind == "host_argument"


def test_clean_function_has_no_findings() -> None:
    report = check(double, jnp.ones(3))
    assert report.diagnostics == () and report.target == "tpu"
    assert report.jax_version == jax.__version__


def test_unknown_target_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown target"):
        check(double, jnp.ones(3), target="cpu")


def test_function_ref_of_a_lambda_and_a_builtin() -> None:
    square = lambda x: x * x  # noqa: E731 - a lambda is what this test names
    ref = function_ref(jax.jit(square))
    assert (ref.name, ref.path, ref.line) == (
        "<lambda>",
        __file__,
        inspect.getsourcelines(square)[1],
    )
    assert function_ref(len) == offload_fixer.FunctionRef("len")
