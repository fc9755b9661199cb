"""Static diagnostics feed the fix planner unchanged, and the fixed file checks clean."""

from __future__ import annotations

import textwrap

import pytest

from offload_fixer.fixes import apply_plans, plan_fixes
from offload_fixer.static import check_paths

from .helpers import LEGACY, PROPAGATION, TYPED

PROGRAM = textwrap.dedent("""\
    from functools import partial

    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = jax.make_mesh((1,), ("x",))
    host = NamedSharding(mesh, P(), memory_kind="pinned_host")


    @jax.jit
    def step(params, x):
        moved = jax.device_put(params, host)
        return x * 2, {"m": moved * 2}


    @partial(jax.jit, in_shardings=(host, None))
    def arg_step(opt, x):
        return opt * 2, x
""")


@pytest.mark.parametrize("version", [LEGACY, PROPAGATION, TYPED])
def test_fixed_program_checks_clean(tmp_path, version):
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    before = [d for r in check_paths([str(path)], jax_version=version) for d in r.diagnostics]
    assert before
    plans = plan_fixes(before, "auto", jax_version=version)
    assert plans and all(not p.problems for p in plans)
    results = apply_plans(plans, write=True, unsafe=True)
    assert all(r.error is None for r in results)
    assert path.read_text() != PROGRAM
    after = [d for r in check_paths([str(path)], jax_version=version) for d in r.diagnostics]
    assert after == []
