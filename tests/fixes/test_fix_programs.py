"""Real programs, fixed as ``--fix`` fixes them, with each strategy, then judged: no OFL1200 is
left, the function computes the same values on CPU, a second fix changes nothing, and the
released TPU compiler (``offload_fixer.xla``, the ``tpu_compiler`` fixture) compiles the fixed
function, as the analysis predicts.

Each program in ``programs/`` defines ``entry`` (the jitted function), ``abstract_args()`` (what
it is lowered with), ``concrete_args()`` (what it runs with on CPU) and ``REGIMES`` (the JAX
regimes in which it triggers error 1200). ``programs/<name>.<strategy>.after.py`` is the exact
text the fix must produce under JAX >= 0.7.1; a strategy without its own file must produce the
``auto`` one. ``NOT_FIXABLE`` (optional) maps a strategy to why ``--fix`` must not apply it
there: the test checks that no safe fix is offered for it.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType

import jax
import numpy as np
import pytest

from offload_fixer import jax_compat
from offload_fixer.api import check
from offload_fixer.fixes import apply_plans, plan_fixes
from offload_fixer.model import STRATEGIES
from offload_fixer.xla.agreement import compare

PROGRAMS = Path(__file__).parent / "programs"
NAMES = sorted(p.stem for p in PROGRAMS.glob("*.py") if not p.stem.endswith(".after"))
_names = itertools.count()


def load(path: Path) -> ModuleType:
    name = f"_offload_fixer_program_{next(_names)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def skip_reason(name: str) -> str | None:
    text = (PROGRAMS / f"{name}.py").read_text()
    regime = jax_compat.regime().name
    if "REGIMES = (" in text and f'"{regime}"' not in text.split("REGIMES = (", 1)[1].split(")", 1)[0]:
        return f"{name} triggers error 1200 only in other JAX regimes than {regime}"
    if (
        'memory_kind="pinned_host"' in text or 'with_memory_kind("pinned_host")' in text
    ) and not jax_compat.host_memory_on_this_backend():
        return "this JAX's CPU backend cannot build a pinned_host sharding"
    return None


def expected_text(name: str, strategy: str) -> str | None:
    if jax_compat.regime() is not jax_compat.Regime.TYPED:
        return None
    for candidate in (f"{name}.{strategy}.after.py", f"{name}.auto.after.py"):
        if (PROGRAMS / candidate).exists():
            return (PROGRAMS / candidate).read_text()
    return None


def leaves(value) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in jax.tree.leaves(value)]


def run_on_cpu(module: ModuleType) -> list[np.ndarray]:
    """Compiled ahead of time from the abstract arguments, as streaming programs are (called
    directly with host arrays, JAX >= 0.7.1 refuses to mix memory spaces while tracing)."""
    return leaves(module.entry.lower(*module.abstract_args()).compile()(*module.concrete_args()))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", NAMES)
def test_fixed_program(request: pytest.FixtureRequest, tmp_path: Path, name: str, strategy: str) -> None:
    reason = skip_reason(name)
    if reason:
        pytest.skip(reason)
    path = tmp_path / f"{name}.py"
    path.write_bytes((PROGRAMS / f"{name}.py").read_bytes())
    original = load(path)
    report = check(original.entry, *original.abstract_args(), target="tpu")
    assert report.by_code("OFL1200") or report.by_code("OFL1201"), "the program must need a fix"
    want = run_on_cpu(original)

    plans = plan_fixes(report, strategy=strategy)
    if strategy in getattr(original, "NOT_FIXABLE", {}):
        assert not [p for p in plans if p.safety == "safe"]
        pytest.skip(original.NOT_FIXABLE[strategy])
    results = apply_plans(plans, write=True)  # safe fixes, as --fix
    assert all(r.error is None for r in results) and any(r.written for r in results), results
    expected = expected_text(name, strategy)
    if expected is not None:
        assert path.read_text() == expected

    fixed = load(path)
    again = check(fixed.entry, *fixed.abstract_args(), target="tpu")
    assert again.by_code("OFL1200") == ()
    for have, had in zip(run_on_cpu(fixed), want, strict=True):
        np.testing.assert_allclose(have, had, rtol=1e-6)
    before_second = path.read_bytes()
    apply_plans(plan_fixes(again, strategy=strategy), write=True)
    assert path.read_bytes() == before_second, "a second fix must change nothing"

    tpu = request.getfixturevalue("tpu_compiler")  # last: without libtpu the checks above still run
    verdict = tpu.judge(jax_compat.lower_for_platform(fixed.entry, fixed.abstract_args(), {}, "tpu"))
    assert verdict.outcome == "compiled", verdict.message
    assert compare(again, verdict).agrees, compare(again, verdict).differences
