"""The analysis predicts what the released compilers were measured to do with each probe.

This holds the model to the probes on every machine, with or without a compiler; the
fidelity tests hold the probes, and the model, to the compilers where they are installed.
A probe the analysis is known to decide otherwise than one compiler (``known_differences``)
must still differ there (strict), so a change on either side shows.
"""

from __future__ import annotations

import probes
import pytest
from known_differences import known_difference

from offload_fixer import analyze, codes, jax_compat


@pytest.mark.parametrize("target", ["tpu", "gpu"])
@pytest.mark.parametrize("probe", probes.PROBES, ids=[probe.name for probe in probes.PROBES])
def test_the_analysis_predicts_the_measured_outcome(probe: probes.Probe, target: str):
    reason = probes.skip_reason(probe, target)
    if reason:
        pytest.skip(reason)
    generation = jax_compat.xla_generation()
    report = analyze(probes.lower(probe, "tpu" if target == "tpu" else "cuda"), target)
    differences = probes.differences(probe, target, generation, report)
    compiler = generation.compiler(target)
    if compiler and known_difference(f"probes/{probe.name}", compiler):
        assert differences, f"the analysis now agrees with {compiler} on {probe.name}; drop the known difference"
        return
    assert not differences, f"{probe.why}: {differences}"
    assert bool(report.by_code(codes.OFFLOAD_DOES_NOTHING)) == (target in probe.does_nothing), probe.why


def test_every_probe_says_why():
    assert all(probe.why and set(probe.expect) == {"tpu", "gpu"} for probe in probes.PROBES)
