"""The trigger catalogue of ``docs/jax-versions.md``, lowered for TPU on this CPU and analysed.

For the installed JAX (its regime picks the catalogue column) each program must get the
row's verdict: ``E`` means exactly the row's output gets OFL1200, traced to the source line of
the move that made it host memory; ``ok`` means no OFL1200. No program may get an error the
row does not predict.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import catalogue
import jax
import pytest
from catalogue import OK, Case, E

from offload_fixer import analyze, jax_compat

REGIME = jax_compat.regime().name


def _cases() -> list[Case]:
    cases: list[Case] = []
    for module in pkgutil.iter_modules(catalogue.__path__):
        cases.extend(importlib.import_module(f"catalogue.{module.name}").CASES)
    return cases


CASES = _cases()


def _origin_lines(fn) -> set[int]:
    lines, start = inspect.getsourcelines(fn)
    return {start + i for i, text in enumerate(lines) if text.rstrip().endswith("# origin")}


def _assert_origin_line(case: Case, span) -> None:
    functions = case.origin_in if isinstance(case.origin_in, tuple) else (case.origin_in or case.fn,)
    marked = {(Path(inspect.getsourcefile(fn)).name, line) for fn in functions for line in _origin_lines(fn)}
    assert span is not None, "the origin has no source location"
    assert (Path(span.path).name, span.line) in marked


def _skip_reason(case: Case) -> str | None:
    if case.expect[REGIME] is None:
        return f"the catalogue gives no verdict for {case.name} in regime {REGIME}"
    kinds = {m.kind for m in jax.devices()[0].addressable_memories()}
    missing = [kind for kind in case.needs if kind not in kinds]
    if missing:
        return f"JAX {jax.__version__} on {jax.devices()[0].platform} has no {', '.join(missing)} memory for shardings"
    return case.skip_if()


def _analyze(case: Case):
    jitted = jax.jit(case.fn, **case.jit())
    lowered = jax_compat.lower_for_platform(jitted, case.args(), {}, "tpu")
    return analyze(lowered, target="tpu")


def _expected_output(case: Case) -> int:
    """The flat output index of the row's offending leaf, from JAX's own view of the result."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(jax.eval_shape(case.fn, *case.args()))
    if case.output_leaf is not None:
        (index,) = [i for i, (_, leaf) in enumerate(leaves) if case.output_leaf(leaf)]
    else:
        (index,) = [i for i, (path, _) in enumerate(leaves) if jax.tree_util.keystr(path) == case.output_path]
    return index


def test_catalogue_covers_every_row_module():
    names = {module.name for module in pkgutil.iter_modules(catalogue.__path__)}
    assert len(names) >= 15 and all(importlib.import_module(f"catalogue.{n}").CASES for n in names)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_catalogue_row(case: Case):
    reason = _skip_reason(case)
    if reason:
        pytest.skip(reason)
    expected = case.expect[REGIME]
    report = _analyze(case)
    ofl1200 = report.by_code("OFL1200")
    also = case.also.get(REGIME, ())

    if expected == OK:
        assert not ofl1200, f"{case.name} is fine on JAX {jax.__version__}, got {[d.message for d in ofl1200]}"
    else:
        assert expected == E
        output = _expected_output(case)
        assert ofl1200 and {d.output_index for d in ofl1200} == {output}
        assert report.outputs[output].verdict == "error"
        for diagnostic in ofl1200:  # one per origin that reaches the output
            assert diagnostic.severity == "error"
            assert diagnostic.output_path == report.outputs[output].path
            if case.output_path is not None:
                assert diagnostic.output_path == case.output_path
            assert diagnostic.origin.kind == case.origin_kind
            if case.origin_kind != "host_argument":
                _assert_origin_line(case, diagnostic.origin.span)

    for code in also:
        assert report.by_code(code), f"{code} expected for {case.name} on JAX {jax.__version__}"
    allowed_errors = set(also) | ({"OFL1200"} if expected == E else set())
    unexpected = [d for d in report.errors if d.code not in allowed_errors]
    assert not unexpected, [f"{d.code}: {d.message}" for d in unexpected]
