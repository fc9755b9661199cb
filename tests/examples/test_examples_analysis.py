"""The dynamic analysis, run on each example's jitted functions, finds what the example's
``.expected.json`` records (host-compute warnings OFL1201/OFL1206 aside)."""

from __future__ import annotations

import pytest
from examples_support import (
    ARGUMENTS,
    EXAMPLE_NAMES,
    SKIP_REASON,
    import_example,
    is_jitted,
    jax_runs_examples,
    load_expected,
)

from offload_fixer import analyze, jax_compat

pytestmark = pytest.mark.skipif(not jax_runs_examples(), reason=SKIP_REASON)

WARNINGS_NOT_RECORDED = {"OFL1201", "OFL1206"}


def found(name: str) -> set[tuple]:
    module = import_example(name)
    results = set()
    for function, build_args in ARGUMENTS[name].items():
        lowered = jax_compat.lower_for_platform(getattr(module, function), build_args(module), {}, "tpu")
        for d in analyze(lowered, target="tpu").diagnostics:
            if d.code in WARNINGS_NOT_RECORDED:
                continue
            line = d.origin.span.line if d.origin and d.origin.span else None
            results.add((d.code, line, d.output_path, function))
    return results


def test_every_jitted_function_has_arguments():
    for name in EXAMPLE_NAMES:
        module = import_example(name)
        jitted = {attr for attr, value in vars(module).items() if is_jitted(value)}
        assert jitted == set(ARGUMENTS[name]), name


# Where the analysis and the recorded expectation disagree today (reported to the lead; see
# examples/README.md). Strict: once the analysis changes, the marker has to go.
DISAGREEMENTS = {}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=DISAGREEMENTS[name]))
        if name in DISAGREEMENTS
        else name
        for name in EXAMPLE_NAMES
    ],
)
def test_analysis_matches_expected(name):
    expected = {(e["code"], e["line"], e["output_path"], e["function"]) for e in load_expected(name)}
    assert found(name) == expected
