"""The rule pages' examples against the released compilers: each invalid example shows the
rule's pattern to the compiler (the error it stops with, or the host compute it warns of),
each valid example compiles without it. This is what decides whether an example is right;
``tests/test_rules.py`` holds the analysis and the source check to the same examples."""

from __future__ import annotations

import pytest

from offload_fixer import codes, jax_compat
from offload_fixer.rules import get_rule

PLATFORMS = {"tpu": "tpu", "gpu": "cuda"}


def _lower(source: str, name: str, platform: str):
    namespace: dict = {}
    exec(compile(source, name, "exec"), namespace)
    return jax_compat.lower_for_platform(namespace["f"], tuple(namespace["args"]), {}, platform)


def _shown(code: str, verdict, lowered, target: str) -> bool:
    """Whether the compiler's verdict shows the pattern of ``code``."""
    evidence = get_rule(code).compiled_evidence
    if evidence is not None:  # the program compiles: its memory figures show the finding
        from offload_fixer import analyze

        found = analyze(lowered, target).by_code(code)
        return bool(found) and all(evidence(verdict, d) is not None for d in found)
    if code == codes.DEVICE_COMPUTE_ON_HOST:
        return bool(verdict.host_compute)
    if code == codes.HOST_SLICE_NOT_MOVED_TO_DEVICE:
        return bool(verdict.host_slices)
    if verdict.outcome not in ("rejected", "aborted"):
        return False
    # A text two rules share names no code (libtpu's "DMA from hbm to hbm"): the rule's own texts decide.
    texts = get_rule(code).failure_texts
    return verdict.code == code or (verdict.code is None and any(m.pattern().search(verdict.message) for m in texts))


def _examples(rule, kind: str, target: str) -> tuple[str, ...]:
    """The rule's ``kind`` programs ``target``'s compiler can be given; a skip saying why where
    it can be given none (a Pallas TPU kernel for CUDA)."""
    sources = rule.examples(kind, target=target)
    if not sources:
        pytest.skip("; ".join(rule.examples_not_for(kind, target)))
    return sources


needs_host_memory = pytest.mark.skipif(
    not jax_compat.host_memory_on_this_backend(),
    reason="the examples build pinned_host shardings, which this JAX's CPU backend lacks",
)


COMPILED = [c for c in codes.ALL_CODES if not get_rule(c).judged_by_jax]
"""The codes whose examples a compiler sees (JAX refuses the others': ``tests/test_rules.py`` runs them)."""


@needs_host_memory
@pytest.mark.parametrize("code", [c for c in COMPILED if c != codes.UNPINNED_HOST_MEMORY])
def test_the_compiler_shows_each_invalid_example_and_no_valid_one(code, judge):
    """OFL1204 is left out: its trap is how JAX types the move, which the compiler never sees
    (it compiles the move like any other)."""
    rule = get_rule(code)
    platform = PLATFORMS[judge.target]
    for source in _examples(rule, "valid", judge.target):
        valid = judge.judge(_lower(source, f"<{code} valid>", platform))
        assert valid.outcome == "compiled", valid.message
        assert not (valid.host_compute or valid.host_slices), "the valid example warns of host compute"
    shown = rule.applies(jax_compat.spelling()) and rule.severity(judge.target) != "info"
    for source in _examples(rule, "invalid", judge.target):
        lowered = _lower(source, f"<{code} invalid>", platform)
        invalid = judge.judge(lowered)
        if shown:
            assert _shown(code, invalid, lowered, judge.target), (invalid.outcome, invalid.code, invalid.message)
        else:  # the page says this compiler accepts the pattern, or gives another rule's verdict
            from offload_fixer import analyze

            predicted = analyze(lowered, judge.target).predicted
            assert (invalid.outcome, invalid.code) == (predicted.outcome, predicted.code), invalid.message
            assert invalid.code != code


@needs_host_memory
@pytest.mark.parametrize("kind", ["invalid", "valid"])
@pytest.mark.parametrize("code", COMPILED)
def test_the_source_check_reports_error_1200_on_an_example_only_where_the_compiler_does(code, kind, judge):
    from offload_fixer.static.api import check_source

    for source in _examples(get_rule(code), kind, judge.target):
        static = {d.code for d in check_source(source, f"<{code} {kind}>", target=judge.target).diagnostics}
        verdict = judge.judge(_lower(source, f"<{code} {kind}>", PLATFORMS[judge.target]))
        rejected = verdict.outcome == "rejected" and verdict.code == codes.HOST_VALUE_DEVICE_OUTPUT
        if "pl.pallas_call(" in source:
            # The source check does not read Pallas kernels: what a kernel returns is unknown to
            # it, so it may miss error 1200 there, never report it falsely.
            assert codes.HOST_VALUE_DEVICE_OUTPUT not in static or rejected, (static, verdict.outcome)
            continue
        assert (codes.HOST_VALUE_DEVICE_OUTPUT in static) == rejected, (static, verdict.outcome, verdict.code)
