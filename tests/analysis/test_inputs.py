"""One module, four ways in: a Lowered, an MLIR module, StableHLO text and bytecode agree."""

import io

import jax
import jax.numpy as jnp
import pytest

from offload_fixer import analyze, jax_compat
from offload_fixer.ir.module import ModuleReadError


def stash(x):
    kept = jax.device_put(x, jax_compat.memory_move_target("pinned_host"))
    return kept * 2, kept


def _lowered():
    # an explicit device out_sharding is not needed: on every JAX the second output is host or
    # streamed, and on JAX <= 0.7.0 the first is a device output reached by host compute
    return jax_compat.lower_for_platform(stash, (jnp.ones((4,)),), {}, "tpu")


def _summary(report):
    return sorted(
        (d.code, d.severity, d.output_path, d.origin.span.line if d.origin and d.origin.span else None)
        for d in report.diagnostics
    ), [(o.path, o.memory_kind, o.verdict) for o in report.outputs]


def test_every_input_form_gives_the_same_report():
    lowered = _lowered()
    module = lowered.compiler_ir("stablehlo")
    text = module.operation.get_asm(enable_debug_info=True)
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    expected = _summary(analyze(lowered))
    assert expected[0], "the program must give the analysis something to report"
    for form in (module, text, buffer.getvalue()):
        assert _summary(analyze(form)) == expected


def test_text_without_locations_still_finds_the_outputs():
    module = _lowered().compiler_ir("stablehlo")
    bare = analyze(module.operation.get_asm(enable_debug_info=False))
    assert [(o.path, o.verdict) for o in bare.outputs] == [(o.path, o.verdict) for o in analyze(module).outputs]
    assert all(d.origin.span is None for d in bare.diagnostics if d.origin)


@pytest.mark.parametrize(
    "source",
    ["this is not MLIR", b"\x00\x01garbage", "module {\n  func.func private @helper() {\n    return\n  }\n}\n", 42],
)
def test_unreadable_input_is_a_clear_error(source):
    with pytest.raises(ModuleReadError):
        analyze(source)


def test_unknown_target_is_refused():
    with pytest.raises(ValueError, match="unknown target"):
        analyze(_lowered(), target="npu")
