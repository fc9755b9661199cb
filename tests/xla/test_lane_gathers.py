"""A 1-D host output gathered from the shards of its value: the analysis predicts the
outcome the released compilers give (OFL1214 where libtpu fails), and the compilers give the
outcome the probes recorded.

Their own file, not ``probes.PROBES``: where such a program compiles, libtpu and XLA:GPU gather
the shards in host memory and warn of the all-gather as host compute, which the analysis does
not report, so the fidelity comparison (host compute included) would fail on a detail the
outcome does not depend on.
"""

from __future__ import annotations

import probes
import pytest

from offload_fixer import analyze, codes, jax_compat
from offload_fixer.xla.agreement import outcome_class

PLATFORMS = {"tpu": "tpu", "gpu": "cuda"}


@pytest.mark.parametrize("probe", probes.LANE_GATHERS, ids=[probe.name for probe in probes.LANE_GATHERS])
def test_the_analysis_and_the_compiler_give_the_measured_outcome(probe: probes.Probe, judge):
    reason = probes.skip_reason(probe, judge.target)
    if reason:
        pytest.skip(reason)
    lowered = probes.lower(probe, PLATFORMS[judge.target])
    report, verdict = analyze(lowered, judge.target), judge.judge(lowered)
    measured = probes.expected(probe, judge.target, jax_compat.xla_generation())
    assert outcome_class(verdict.outcome, verdict.code) == measured, verdict.message
    predicted = report.predicted
    assert outcome_class(predicted.outcome, predicted.code) == measured, probe.why
    assert bool(report.by_code(codes.HOST_LANES_UPDATED_BY_LAYOUT)) == (measured == probes.OTHER)
