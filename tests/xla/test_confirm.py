"""``confirm``: findings checked by the released compiler, fixes compiled before they are written."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from examples_support import ARGUMENTS, import_example, jax_runs_examples

import offload_fixer
from offload_fixer import jax_compat
from offload_fixer.model import FunctionRef
from offload_fixer.report_file import AbstractCall
from offload_fixer.verify.lowering import compile_fixed
from offload_fixer.xla.confirm import confirm, with_host_output

examples = pytest.mark.skipif(not jax_runs_examples(), reason="the examples target JAX >= 0.10")


@examples
@pytest.mark.parametrize("name", ["optimizer_offload_broken", "param_streaming_broken", "unpinned_host_trap"])
def test_every_error_1200_of_the_broken_examples_is_confirmed(name, judge):
    module = import_example(name)
    ((function, build),) = ARGUMENTS[name].items()
    report = offload_fixer.check(getattr(module, function), *build(module), target=judge.target, confirm=True)
    errors = report.by_code("OFL1200")
    assert errors and all(d.confirmed for d in errors)
    assert all("is returned from the entry computation" in d.xla_message for d in errors)
    assert report.xla is not None and report.xla.code == "OFL1200"
    assert report.unpredicted == ()


def test_a_compilation_the_analysis_gets_wrong_is_said_so(judge):
    """The analysis' report of another module, confirmed against this one: the compiler's
    rejection is reported as one the analysis did not predict."""
    cpu = jax.devices()[0]
    if not jax_compat.host_memory_on_this_backend():
        pytest.skip("needs pinned_host shardings on the CPU backend")
    host = jax.sharding.SingleDeviceSharding(cpu, memory_kind="pinned_host")
    platform = "tpu" if judge.target == "tpu" else "cuda"
    vector = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    clean = jax.jit(lambda x: x + 1).trace(vector).lower(lowering_platforms=(platform,))
    broken = jax.jit(lambda x: x * 2, in_shardings=host).trace(vector).lower(lowering_platforms=(platform,))
    report = confirm(offload_fixer.analyze(clean, judge.target), broken, judge)
    assert report.xla.code == "OFL1200"
    assert report.unpredicted and "the analysis predicts compiled" in report.unpredicted[0]


def test_declaring_an_output_host_memory_is_what_xla_then_accepts(tpu_compiler):
    if not jax_compat.host_memory_on_this_backend():
        pytest.skip("needs pinned_host shardings on the CPU backend")
    host = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")
    vector = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    lowered = (
        jax.jit(lambda x, y: (x * 2, y), in_shardings=(host, None))
        .trace(vector, vector)
        .lower(lowering_platforms=("tpu",))
    )
    assert tpu_compiler.judge(lowered).code == "OFL1200"
    assert tpu_compiler.judge(with_host_output(lowered.as_text(debug_info=True), 0)).outcome == "compiled"


BROKEN = """\
import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import SingleDeviceSharding

HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


def layers(w, x):
    def layer(h, wi):
        return jnp.tanh(h @ wi), None

    return lax.scan(layer, x, w)[0]


step = jax.jit(layers, in_shardings=(HOST, None){out})
"""


@pytest.mark.skipif(not jax_compat.host_memory_on_this_backend(), reason="needs pinned_host shardings on CPU")
@pytest.mark.parametrize(
    "out, confirmed",
    [
        # Declaring the output host memory ends error 1200, but libtpu cannot build the dot of
        # device activations with host weights in the loop: refused.
        (", out_shardings=HOST", False),
        # Moving the weights to device first (the device fix) compiles.
        (None, True),
    ],
)
def test_a_fix_is_compiled_from_the_fixed_file_before_it_is_written(tmp_path: Path, out, confirmed, tpu_compiler):
    path = tmp_path / "train.py"
    path.write_text(BROKEN.format(out=""))
    fixed = (
        BROKEN.format(out=out)
        if out is not None
        else BROKEN.format(out="").replace(
            "    return lax.scan(layer, x, w)[0]",
            "    w = jax.device_put(w, jax.memory.Space.Device)\n    return lax.scan(layer, x, w)[0]",
        )
    )
    if out is None and not jax_compat.spelling().memory_space_api:
        pytest.skip("the device fix is spelled with jax.memory.Space here")
    args = (jax.ShapeDtypeStruct((3, 128, 128), jnp.float32), jax.ShapeDtypeStruct((8, 128), jnp.float32))
    call = AbstractCall(None, args, {})
    check = compile_fixed({str(path): fixed}, FunctionRef("layers", str(path), 9), call, "tpu")
    assert check.confirmed is confirmed, check.reason
    if not confirmed:
        assert "still rejects the fixed `layers`" in check.reason
    assert path.read_text() == BROKEN.format(out="")  # nothing is written here
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]  # the temporary copy is gone


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_every_format_records_a_verdict_the_analysis_did_not_predict_in_xlas_words(fmt, judge):
    import json

    from offload_fixer.report import render

    if not jax_compat.host_memory_on_this_backend():
        pytest.skip("needs pinned_host shardings on the CPU backend")
    host = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")
    platform = "tpu" if judge.target == "tpu" else "cuda"
    vector = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    clean = jax.jit(lambda x: x + 1).trace(vector).lower(lowering_platforms=(platform,))
    broken = jax.jit(lambda x: x * 2, in_shardings=host).trace(vector).lower(lowering_platforms=(platform,))
    report = confirm(offload_fixer.analyze(clean, judge.target), broken, judge)
    (difference,) = report.unpredicted
    text = render(fmt, [], target=judge.target, compilations=[report])
    if fmt == "github":
        assert text.startswith("::error title=offload-fixer --confirm::") and "the analysis predicts compiled" in text
        return
    document = json.loads(text)
    if fmt == "json":
        assert document["unpredicted"] == [f"{report.function.name}: {difference}"]
        (compiled,) = document["compilations"]
    else:
        (run,) = document["runs"]
        notes = run["invocations"][0]["toolExecutionNotifications"]
        assert [n["message"]["text"] for n in notes] == [f"{report.function.name}: {difference}"]
        assert notes[0]["level"] == "error"
        (compiled,) = run["properties"]["compilations"]
    assert (
        compiled["xla"]["message"] == report.xla.message
        and "is returned from the entry computation" in report.xla.message
    )
    assert compiled["predicted"]["outcome"] == "compiled" and compiled["unpredicted"] == [difference]


def _kernel_updating_in_place(cache_ref, x_ref, cache_out_ref, stats_ref):
    del cache_ref, x_ref, cache_out_ref, stats_ref  # the cache is updated where it lies


def _update_cache(cache, x):
    """A Pallas kernel with two outputs, the first the host input it updates in place."""
    from jax.experimental import pallas as pl

    anywhere = pl.BlockSpec(memory_space=pl.ANY)
    outputs = (jax.ShapeDtypeStruct(cache.shape, cache.dtype), jax.ShapeDtypeStruct(x.shape, x.dtype))
    cache, _ = pl.pallas_call(
        _kernel_updating_in_place,
        out_shape=outputs,
        in_specs=[anywhere, anywhere],
        out_specs=(anywhere, anywhere),
        input_output_aliases={0: 0},
    )(cache, x)
    return cache


def test_a_compiler_that_aborts_on_a_finding_is_quoted(tpu_compiler):
    """A host buffer aliased into one element of a kernel's tuple of outputs: XLA's host
    offloader follows it with the operand's (empty) shape index, and at the tuple's element read
    libtpu 0.0.42.1 fails ``host_offload_utils.cc:98``'s CHECK and the compiling process dies
    (OFL1216, which ``--confirm`` confirms by that CHECK, the text OFL1205's loop condition
    shares); libtpu 0.0.50.1 gives error 1200."""
    if not jax_compat.host_memory_on_this_backend():
        pytest.skip("needs pinned_host shardings on the CPU backend")
    mesh = jax.sharding.Mesh(jax.devices()[:1], ("x",))
    host = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(), memory_kind="pinned_host")
    cache = jax.ShapeDtypeStruct((8, 128), jnp.float32, sharding=host)
    x = jax.ShapeDtypeStruct((8, 128), jnp.float32, sharding=host.with_memory_kind("device"))
    lowered = jax.jit(_update_cache).trace(cache, x).lower(lowering_platforms=("tpu",))
    confirmed = confirm(offload_fixer.analyze(lowered, "tpu"), lowered, tpu_compiler)
    if tpu_compiler.compiler == "libtpu 0.0.42.1":
        (finding,) = confirmed.by_code("OFL1216")
        assert finding.confirmed and finding.message.startswith("libtpu 0.0.42.1 aborts compiling this")
        assert "host_offload_utils.cc:98] Check failed: !tmp_shape_index.empty()" in finding.xla_message
    else:
        (finding,) = confirmed.by_code("OFL1200")
        assert finding.confirmed and "E1200" in finding.xla_message
