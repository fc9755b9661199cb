"""Calls as the host offloader meets them: XLA's call inliner has inlined a nested jit's call by
then, but keeps a shard_map body (``shmap_body``, JAX's lowering before Shardy) as a call.

The modules are what JAX 0.4.35 lowers for ``jax.jit(f)`` where ``f`` returns a nested jit's
(or a shard_map's) ``device_put(x, pinned_host)``; JAX 0.4.35 has no compiler here to lower
them with, so they are written out and judged as text.
"""

from __future__ import annotations

import pytest

from offload_fixer import analyze
from offload_fixer.xla.agreement import compare

MODULE = """\
module @jit_f attributes {{mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32}} {{
  func.func public @main(%arg0: tensor<8xf32>) -> (tensor<8xf32> {{jax.result_info = ""}}) {{
    %0 = call @{callee}(%arg0) : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }}
  func.func private @{callee}(%arg0: tensor<8xf32>) -> tensor<8xf32> {{
    %0 = stablehlo.custom_call @annotate_device_placement(%arg0) {{backend_config = "", has_side_effect = true, \
mhlo.frontend_attributes = {{_xla_buffer_placement = "pinned_host"}}}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }}
}}
"""
CALLS = [
    # inlined: the move is the whole single output, which the compilers repair
    ("_offload", "compiled"),
    # kept: the call, not the move, is the root, and the value it returns is host memory
    ("shmap_body", "rejected"),
]


@pytest.mark.parametrize(("callee", "outcome"), CALLS)
def test_the_analysis_inlines_what_xla_inlines(callee: str, outcome: str) -> None:
    report = analyze(MODULE.format(callee=callee), target="tpu")
    assert report.predicted.outcome == outcome
    if outcome == "rejected":
        (diagnostic,) = report.by_code("OFL1200")
        assert "starting from call." in diagnostic.message


@pytest.mark.parametrize(("callee", "outcome"), CALLS)
def test_the_released_compilers_agree(callee: str, outcome: str, judge) -> None:
    text = MODULE.format(callee=callee)
    verdict = judge.judge(text)
    assert verdict.outcome == outcome, verdict.message
    agreement = compare(analyze(text, judge.target), verdict)
    assert agreement.agrees, agreement.differences
