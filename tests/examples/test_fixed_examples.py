"""The committed fixes in ``examples/fixed/`` are what the tool produces, and they hold: neither
the dynamic analysis nor the static check finds anything left to fix, the fixed program prints
the same losses on CPU, a second fix changes nothing, and the released TPU compiler compiles the
fixed step, as the analysis predicts."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offload_fixer import jax_compat
from offload_fixer.fixes import FIXABLE_CODES, apply_plans, plan_fixes
from offload_fixer.runner import run_program
from offload_fixer.static import check_paths
from offload_fixer.xla.agreement import compare

ROOT = Path(__file__).resolve().parents[2]
FIXED = ROOT / "examples" / "fixed"

pytestmark = pytest.mark.skipif(
    jax_compat.regime() is not jax_compat.Regime.TYPED or not jax_compat.host_memory_on_this_backend(),
    reason="the fixes were produced for JAX >= 0.7.1 with pinned_host memory on the CPU",
)


def _script():
    spec = importlib.util.spec_from_file_location("fix_examples", ROOT / "scripts" / "fix_examples.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _losses(path: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        check=True,
    )
    return [line for line in done.stdout.splitlines() if line.startswith("step")]


def _step_and_inputs(path: Path):
    spec = importlib.util.spec_from_file_location(f"fixed_{path.stem.replace('.', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if hasattr(module, "abstract_inputs"):
        return module.train_step, module.abstract_inputs()
    return module.train_step, (module.init_params(), module.make_batch(0))


@pytest.mark.parametrize("name", _script().BROKEN)
@pytest.mark.parametrize("strategy", _script().STRATEGIES)
def test_committed_fix_is_what_the_tool_writes(
    request: pytest.FixtureRequest, tmp_path: Path, name: str, strategy: str
):
    produced, _declined = _script().fix_example(name, strategy, tmp_path)
    committed = FIXED / f"{name}.{strategy}.py"
    if produced is None:
        assert not committed.exists()
        return
    assert committed.read_text() == produced.read_text()

    rerun = run_program(str(produced), [], target="tpu")
    assert rerun.program_exit_code == 0, rerun.program_exception
    assert not [d for d in rerun.diagnostics if d.code == "OFL1200"]
    static = [d for result in check_paths([str(produced)], target="tpu") for d in result.diagnostics]
    assert not [d for d in static if d.code in FIXABLE_CODES], static
    assert _losses(produced) == _losses(ROOT / "examples" / f"{name}.py")
    again = apply_plans(plan_fixes(rerun.reports, strategy=strategy), write=False)
    assert not any(result.changed for result in again), "a second fix must change nothing"

    step, inputs = _step_and_inputs(produced)
    (report,) = [r for r in rerun.reports if r.function is not None and r.function.name.endswith("train_step")]
    tpu = request.getfixturevalue("tpu_compiler")  # last: without libtpu the checks above still run
    verdict = tpu.judge(jax_compat.lower_for_platform(step, inputs, {}, "tpu"))
    assert verdict.outcome == "compiled", verdict.message
    assert compare(report, verdict).agrees, compare(report, verdict).differences
