"""The analysis predicts what the released compilers were measured to do with each probe.

This holds the model to the probes on every machine, with or without a compiler; the
fidelity tests hold the probes, and the model, to the compilers where they are installed.
"""

from __future__ import annotations

import probes
import pytest

from offload_fixer import analyze, codes, jax_compat
from offload_fixer.xla.agreement import outcome_class


@pytest.mark.parametrize("target", ["tpu", "gpu"])
@pytest.mark.parametrize("probe", probes.PROBES, ids=[probe.name for probe in probes.PROBES])
def test_the_analysis_predicts_the_measured_outcome(probe: probes.Probe, target: str):
    reason = probes.skip_reason(probe)
    if reason:
        pytest.skip(reason)
    report = analyze(probes.lower(probe, "tpu" if target == "tpu" else "cuda"), target)
    predicted = outcome_class(report.predicted.outcome, report.predicted.code)
    assert predicted == probes.expected(probe, target, jax_compat.xla_generation()), probe.why
    if probe.names:
        assert report.predicted.instruction == probe.names[target], probe.why
    if probe.first_output is not None:
        assert report.predicted.output_index == probe.first_output, probe.why
    does_nothing = target in probe.does_nothing and jax_compat.regime() is jax_compat.Regime.TYPED
    assert bool(report.by_code(codes.OFFLOAD_DOES_NOTHING)) == does_nothing, probe.why


def test_every_probe_says_why():
    assert all(probe.why and set(probe.expect) == {"tpu", "gpu"} for probe in probes.PROBES)
