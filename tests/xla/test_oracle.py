"""The oracle: a released compiler's verdict on one module, as plain data."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from offload_fixer import jax_compat, xla
from offload_fixer.model import XlaVerdict

needs_host_memory = pytest.mark.skipif(
    not jax_compat.host_memory_on_this_backend(), reason="needs pinned_host shardings on the CPU backend"
)
PLATFORMS = {"tpu": "tpu", "gpu": "cuda"}


def lower(fn, *args, platform, **jit):
    return jax.jit(fn, **jit).trace(*args).lower(lowering_platforms=(platform,))


def host():
    return jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


def vector():
    return jax.ShapeDtypeStruct((8, 128), jnp.float32)


@needs_host_memory
def test_a_streamed_argument_returned_is_error_1200_named_as_xla_names_it(judge):
    def step(params, x):
        return x + 1, jnp.sin(params) * 2

    lowered = lower(step, vector(), vector(), platform=PLATFORMS[judge.target], in_shardings=(host(), None))
    verdict = judge.judge(lowered)
    assert verdict.outcome == "rejected" and verdict.code == "OFL1200"
    assert verdict.instruction == "params.1"  # after the argument's name, as in a TPU log
    assert verdict.output_index == 1 and verdict.trace[0] == "params.1"
    assert verdict.host_compute  # the warnings, read from libtpu's log files or the plugin's stderr
    assert XlaVerdict.from_dict(verdict.to_dict()) == verdict


@needs_host_memory
def test_a_compiled_module_reports_each_outputs_memory_kind(judge):
    lowered = lower(lambda x: (x * 2, x + 1), vector(), platform=PLATFORMS[judge.target],
                    out_shardings=(host(), None))
    verdict = judge.judge(lowered)
    assert verdict.outcome == "compiled" and verdict.code is None
    assert verdict.output_memory_kinds == ("pinned_host", "device")


@needs_host_memory
def test_a_compiler_that_aborts_is_reported_and_replaced(judge):
    """A loop condition computed from host memory fails a CHECK in the host offloader: the
    compiler process dies, the verdict says so with the CHECK, and the next module is judged
    by a fresh process."""
    from jax import lax

    def scan_with_host_condition(rows):
        history = jax.device_put(jnp.zeros_like(rows), jax_compat.memory_move_target("pinned_host"))

        def keep_going(state):
            return (state[0] < 4) & (jnp.sum(state[1]) < 1e6)

        def write(state):
            i, history = state
            row = jax.device_put(rows[i] * 2, jax_compat.memory_move_target("pinned_host"))
            return i + 1, lax.dynamic_update_slice(history, row[None], (i, 0))

        return lax.while_loop(keep_going, write, (0, history))[1]

    if jax_compat.regime() is not jax_compat.Regime.TYPED:
        pytest.skip("the program needs memory spaces in types (JAX >= 0.7.1)")
    verdict = judge.judge(lower(scan_with_host_condition, jax.ShapeDtypeStruct((4, 128), jnp.float32),
                                platform=PLATFORMS[judge.target]))
    assert verdict.outcome == "aborted" and verdict.code == "OFL1205"
    assert "Check failed" in verdict.message
    assert judge.judge(lower(lambda x: x + 1, vector(), platform=PLATFORMS[judge.target])).outcome == "compiled"


def test_every_input_form_gives_the_same_verdict(tpu_compiler):
    lowered = lower(lambda x: x * 3, vector(), platform="tpu")
    text = lowered.as_text(debug_info=True)
    module = lowered.compiler_ir("stablehlo")
    verdicts = {tpu_compiler.judge(source).outcome for source in (lowered, module, text)}
    assert verdicts == {"compiled"}


def test_a_missing_compiler_is_a_clear_refusal_with_the_install_command(monkeypatch):
    """Asked for a compiler the environment lacks (simulated by hiding its package from the
    metadata lookup), the oracle refuses before starting anything and says what to install."""
    from offload_fixer.xla import compilers

    monkeypatch.setattr(compilers, "installed", lambda target: None)
    oracle = xla.Oracle("tpu")
    with pytest.raises(xla.CompilerUnavailable) as refused:
        oracle.judge(lower(lambda x: x + 1, vector(), platform="tpu"))
    text = str(refused.value)
    assert "no TPU compiler is installed" in text
    requirements = jax_compat.compiler_requirements("tpu")
    if requirements:
        assert f'pip install "jax[tpu]=={jax_compat.installed_version()}"' in text
    else:
        assert "the package registry has none" in text


def test_install_commands_per_jax_version():
    assert jax_compat.compiler_requirements("tpu", "0.10.2") == ["jax[tpu]==0.10.2"]
    assert jax_compat.compiler_requirements("tpu", "0.4.35") is None
    assert jax_compat.compiler_requirements("gpu", "0.12.0.1") == ["jax-cuda12-plugin==0.12.0.1", "jax-cuda12-pjrt==0.12.0.1"]
