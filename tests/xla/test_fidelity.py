"""The analysis agrees with the released compilers on every program the repository holds.

Each program of ``corpora`` is lowered for each target and judged by the analysis and by the
installed compiler (libtpu, JAX's CUDA plugin); ``agreement.compare`` says where they differ:
the outcome (error 1200, compiled, another error), the instruction XLA's message names, the
output its trace ends at, whether it warned of host compute, each compiled output's memory
kind. ``scripts/fidelity.py`` prints the same comparison as confusion matrices.
"""

from __future__ import annotations

import corpora
import pytest
from known_differences import known_difference

from offload_fixer import analyze
from offload_fixer.xla.agreement import compare

PROGRAMS = corpora.programs()
PLATFORMS = {"tpu": "tpu", "gpu": "cuda"}


@pytest.mark.parametrize("program", PROGRAMS, ids=[program.id for program in PROGRAMS])
def test_analysis_agrees_with_the_released_compiler(program: corpora.Program, judge):
    reason = program.skip() or program.skip_target(judge.target)
    if reason:
        pytest.skip(reason)
    lowered = program.lower(PLATFORMS[judge.target])
    if corpora.lowered_alike_without_remat3(program, PLATFORMS[judge.target], lowered):
        pytest.skip("jax_remat3 lowers it as the default remat does: the main pass judged this module")
    report = analyze(lowered, judge.target, remat_policies=corpora.remat_policies(lowered))
    verdict = judge.judge(lowered)
    agreement = compare(report, verdict)
    assert corpora.unflagged_silent_offload(lowered, report, verdict) is None
    known = known_difference(program.id, judge.compiler)
    if known:
        assert not agreement.agrees, f"{judge.compiler} now agrees on {program.id}; drop the known difference"
        return
    assert agreement.agrees, agreement.differences


def test_every_corpus_contributes_programs():
    assert {program.corpus for program in PROGRAMS} == set(corpora.CORPORA)
    assert len(PROGRAMS) >= 100
