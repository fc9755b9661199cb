"""The committed fixes in ``examples/fixed/`` are what the tool produces, and they are clean."""

import importlib.util
import sys
from pathlib import Path

import pytest

from offload_fixer import jax_compat
from offload_fixer.runner import run_program

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


@pytest.mark.parametrize("name", _script().BROKEN)
@pytest.mark.parametrize("strategy", _script().STRATEGIES)
def test_committed_fix_is_what_the_tool_writes(tmp_path: Path, name: str, strategy: str):
    produced, _declined = _script().fix_example(name, strategy, tmp_path)
    committed = FIXED / f"{name}.{strategy}.py"
    if produced is None:
        assert not committed.exists()
        return
    assert committed.read_text() == produced.read_text()
    rerun = run_program(str(committed), [], target="tpu")
    assert rerun.program_exit_code == 0, rerun.program_exception
    assert not [d for d in rerun.diagnostics if d.code == "OFL1200"]
