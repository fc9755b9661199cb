"""Lower a real program for TPU, analyse it, plan and apply the fix to a copy, then lower the
fixed copy again: no OFL1200 is left, and on CPU it computes the same values.

Each program triggers error 1200 in the JAX regimes named with it; under other JAX versions
the case is skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import jax
import numpy as np
import pytest

from offload_fixer import jax_compat
from offload_fixer.api import check
from offload_fixer.fixes import apply_plans, plan_fixes

STREAMED_PARAMS = """\
import jax
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((1,), ("x",))
host = NamedSharding(mesh, P(), memory_kind="pinned_host")
device = NamedSharding(mesh, P())


def scale(params, x):
    return params * 2, x + 1


entry = jax.jit(scale, in_shardings=(host, device))
"""

OFFLOADED_THEN_COMPUTED = """\
import jax
from jax._src.sharding_impls import TransferToMemoryKind


@jax.jit
def entry(x):
    h = jax.device_put(x, TransferToMemoryKind("pinned_host"))
    return x + 1, h * 2
"""

_names = itertools.count()


def load(path: Path) -> ModuleType:
    name = f"_offload_fixer_e2e_{next(_names)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def errors(module: ModuleType, *args: object):
    return check(module.entry, *args, target="tpu").by_code("OFL1200")


def fix_round_trip(tmp_path: Path, source: str, strategy: str, abstract_args, concrete_args):
    path = tmp_path / "program.py"
    path.write_text(textwrap.dedent(source))
    original = load(path)
    found = errors(original, *abstract_args)
    assert found, "the program must trigger OFL1200 before the fix"
    plans = plan_fixes(found, strategy=strategy)
    (result,) = apply_plans(plans, write=True, unsafe=True)
    assert result.error is None and result.written, result
    expected = [np.asarray(v) for v in original.entry(*concrete_args)]
    fixed = load(path)
    assert errors(fixed, *abstract_args) == ()
    got = [np.asarray(v) for v in fixed.entry(*concrete_args)]
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_allclose(have, want)
    return plans, result


def test_streamed_parameter(tmp_path: Path) -> None:
    if not jax_compat.host_memory_on_this_backend():
        pytest.skip("this JAX's CPU backend cannot build a pinned_host sharding")
    abstract = (jax.ShapeDtypeStruct((8,), np.float32), jax.ShapeDtypeStruct((8,), np.float32))
    concrete = (np.arange(8, dtype=np.float32), np.ones(8, np.float32))
    plans, result = fix_round_trip(tmp_path, STREAMED_PARAMS, "auto", abstract, concrete)
    (plan,) = plans
    # Computed on (params * 2): moved to device where the function starts, in every regime
    # (JAX >= 0.7.1 types it device, yet emits the move: the fixed function lowers clean).
    assert (plan.strategy, plan.target.placement) == ("device", "entry")
    if jax_compat.regime() is jax_compat.Regime.TYPED:
        assert "params = jax.device_put(params, jax.memory.Space.Device)" in result.new_text
    else:
        assert 'params = jax.device_put(params, host.with_memory_kind("device"))' in result.new_text


def test_offloaded_value_computed_on_host(tmp_path: Path) -> None:
    if jax_compat.regime() is not jax_compat.Regime.PROPAGATION or not jax_compat.spelling().transfer_to_memory_kind:
        pytest.skip("error 1200 from host compute on an offloaded value needs JAX 0.4.29 - 0.7.0")
    abstract = (jax.ShapeDtypeStruct((8,), np.float32),)
    concrete = (np.arange(8, dtype=np.float32),)
    plans, result = fix_round_trip(tmp_path, OFFLOADED_THEN_COMPUTED, "device", abstract, concrete)
    (plan,) = plans
    assert plan.target.placement == "operand"  # moved back where it is computed on
    assert 'return x + 1, jax.device_put(h, TransferToMemoryKind("device")) * 2' in result.new_text


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example_inputs(module: ModuleType):
    abstract = module.abstract_inputs()
    if hasattr(module, "init_opt_state"):
        params = jax.device_put(module.init_params(), module.PARAM_SHARDINGS)
        opt_state = jax.device_put(module.init_opt_state(module.init_params()), module.OPT_SHARDINGS)
        concrete = (params, opt_state, jax.device_put(module.make_batch(0), module.BATCH_SHARDINGS))
    else:
        concrete = (
            jax.device_put(module.init_params(), module.ON_HOST),
            jax.device_put(module.make_batch(0), module.ON_DEVICE),
        )
    return abstract, concrete


@pytest.mark.parametrize(
    ("name", "strategy", "edit"),
    [
        # Streamed arguments computed on move to device where the step reads them: all of params
        # (read whole), only the moments of opt_state (read by key), next to where they are used.
        ("param_streaming_broken", "device", "    params = jax.device_put(params, jax.memory.Space.Device)\n"),
        ("optimizer_offload_broken", "device", '    mu = jax.device_put(opt_state["mu"], jax.memory.Space.Device)\n'),
    ],
)
def test_broken_examples(tmp_path: Path, name: str, strategy: str, edit: str) -> None:
    if jax_compat.parse_version(jax_compat.installed_version()) < (0, 10, 0):
        pytest.skip("the examples target JAX >= 0.10")
    path = tmp_path / f"{name}.py"
    path.write_bytes((EXAMPLES / f"{name}.py").read_bytes())
    original = load(path)
    abstract, concrete = _example_inputs(original)
    found = check(original.train_step, *abstract, target="tpu").by_code("OFL1200")
    assert found
    plans = plan_fixes(found)
    assert {p.strategy for p in plans} == {strategy}
    results = apply_plans(plans, write=True)  # safe fixes only, as `--fix` applies them
    assert all(r.error is None for r in results) and any(r.written for r in results)
    assert edit in path.read_text()
    fixed = load(path)
    assert check(fixed.train_step, *abstract, target="tpu").by_code("OFL1200") == ()
    want = jax.tree.leaves(original.train_step.lower(*abstract).compile()(*concrete))
    _, concrete = _example_inputs(fixed)  # the step donates its inputs: fresh ones
    have = jax.tree.leaves(fixed.train_step.lower(*abstract).compile()(*concrete))
    for a, b in zip(want, have, strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-6)
