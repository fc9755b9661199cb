"""The oracle: a released compiler's verdict on one module, as plain data."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import probes
import pytest

from offload_fixer import analyze, jax_compat, xla
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
    lowered = lower(lambda x: (x * 2, x + 1), vector(), platform=PLATFORMS[judge.target], out_shardings=(host(), None))
    verdict = judge.judge(lowered)
    assert verdict.outcome == "compiled" and verdict.code is None
    assert verdict.output_memory_kinds == ("pinned_host", "device")


@needs_host_memory
def test_a_compiled_module_counts_its_arguments_and_outputs_in_host_memory(judge):
    """Each is a copy between host and device the compiler stages in HBM, whatever its size
    (``model.HOST_BUFFER_STAGING``): what a fix may hold beyond the program without offload."""
    lowered = lower(
        lambda x, y: (x + 1, y * 2, y),
        vector(),
        vector(),
        platform=PLATFORMS[judge.target],
        in_shardings=(host(), None),
        out_shardings=(host(), host(), None),
    )
    verdict = judge.judge(lowered)
    assert verdict.outcome == "compiled", verdict.message
    assert verdict.memory is not None and verdict.memory.host_buffers == 3  # x, and the first two outputs


ABORTING = {
    "tpu": ("loop_over_host_weights", "OFL1207"),
    "gpu": ("while_condition_on_host", "OFL1205"),
}
"""A probe each target's released compiler fails a CHECK on, and the code of that failure:
libtpu's host-compute alias assigner on a loop dot mixing host and device memory, the CUDA
plugin's host offloader on a loop condition computed from host memory (up to jaxlib 0.11)."""


def _names(verdict, code: str) -> bool:
    """Whether the verdict is ``code``'s: its code, or a CHECK whose text several rules share
    (libtpu 0.0.42.1's ``host_offload_utils.cc:98``: OFL1205, OFL1216), ``code`` among them."""
    from offload_fixer.rules import rule_codes

    return verdict.code == code or (verdict.code is None and code in rule_codes(verdict.message))


def probe_named(name: str) -> probes.Probe:
    probe = next(probe for probe in probes.PROBES if probe.name == name)
    reason = probes.skip_reason(probe)
    if reason:
        pytest.skip(reason)
    return probe


def test_a_compiler_that_aborts_is_reported_and_replaced(judge):
    """The compiler process dies on a CHECK: the verdict says so with the CHECK, and the next
    module is judged by a fresh process."""
    name, code = ABORTING[judge.target]
    if name == "while_condition_on_host" and not jax_compat.xla_generation().while_condition_on_host_aborts:
        pytest.skip(f"no program is known to abort {judge.compiler}")
    verdict = judge.judge(probes.lower(probe_named(name), PLATFORMS[judge.target]))
    assert verdict.outcome == "aborted" and _names(verdict, code)
    assert "Check failed" in verdict.message
    assert judge.judge(lower(lambda x: x + 1, vector(), platform=PLATFORMS[judge.target])).outcome == "compiled"


def test_a_loop_condition_computed_from_host_memory_is_error_1205(judge):
    """Older compilers abort on it (a CHECK in the host offloader); from jaxlib 0.12 it is an
    error that names the condition's instruction (``jax_compat.XlaGeneration``)."""
    lowered = probes.lower(probe_named("while_condition_on_host"), PLATFORMS[judge.target])
    verdict = judge.judge(lowered)
    predicted = analyze(lowered, judge.target).predicted
    assert predicted.code == "OFL1205" and _names(verdict, "OFL1205")
    assert (predicted.outcome, predicted.instruction) == (verdict.outcome, verdict.instruction)
    if jax_compat.xla_generation().while_condition_on_host_aborts:
        assert verdict.outcome == "aborted" and "Check failed" in verdict.message
    else:
        assert verdict.outcome == "rejected" and verdict.instruction.startswith("reduce_sum.")
        assert "during while condition body" in verdict.message


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
    assert jax_compat.compiler_requirements("gpu", "0.12.0.1") == [
        "jax-cuda12-plugin==0.12.0.1",
        "jax-cuda12-pjrt==0.12.0.1",
    ]
