"""A fixed function rebuilt in a copy of its module's namespace: only the statements the fix
changed run again, the program itself never does, an unchanged caller reaches the fixed helper,
and a function built inside another gets the recorded closure."""

from __future__ import annotations

import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from offload_fixer import jax_compat
from offload_fixer.model import FunctionRef
from offload_fixer.report_file import AbstractCall
from offload_fixer.verify.fixed_modules import Unverifiable
from offload_fixer.verify.lowering import compile_fixed
from offload_fixer.verify.namespace import changed_statements, fixed_callable, fixed_namespace

SCRIPT = """\
import jax
import jax.numpy as jnp

RUNS = []


def helper(x):
    return x * 2


def step(x):
    return helper(x) + 1


def main():
    scale = 3.0

    def scaled(x):
        return x * scale

    return jax.jit(scaled)(jnp.ones(4))


for _ in range(2):
    RUNS.append(jax.jit(step)(jnp.ones(4)))
"""


def _run(tmp_path: Path) -> tuple[str, dict]:
    path = str(tmp_path / "script.py")
    namespace: dict = {"__name__": "__main__"}
    exec(compile(SCRIPT, path, "exec"), namespace)
    assert len(namespace["RUNS"]) == 2
    return path, namespace


def test_only_the_statements_the_fix_changed_run_again_and_the_program_never(tmp_path: Path):
    path, namespace = _run(tmp_path)
    after = "import numpy as np\n" + SCRIPT.replace("return x * 2", "return x * 4")
    assert [type(s).__name__ for s in changed_statements(SCRIPT, after)] == ["Import", "FunctionDef"]
    with fixed_namespace(namespace["step"], path, SCRIPT, after) as scope:
        assert len(scope.RUNS) == 2  # the training loop did not run again
        assert scope.np.__name__ == "numpy"
        built, jitted = fixed_callable(namespace["step"], scope, path, after)
        assert not jitted
        # the unchanged step, rebound to the copy, calls the fixed helper
        assert float(built(jnp.ones(()))) == 5.0
    assert float(namespace["step"](jnp.ones(()))) == 3.0  # the program's own namespace is untouched
    assert "np" not in namespace


def test_a_function_built_inside_another_gets_the_fixed_code_and_the_recorded_closure(tmp_path: Path):
    path, namespace = _run(tmp_path)
    recorded = None

    def capture(fun, **options):
        nonlocal recorded
        recorded = fun
        return jax.jit(fun, **options)

    namespace["jax"] = type("J", (), {"jit": staticmethod(capture)})
    namespace["main"]()
    namespace["jax"] = jax
    after = SCRIPT.replace("return x * scale", "return x * scale + 1")
    with fixed_namespace(recorded, path, SCRIPT, after) as scope:
        built, _ = fixed_callable(recorded, scope, path, after)
        assert float(built(jnp.ones(()))) == 4.0  # scale == 3.0, from the run's closure
    renamed = SCRIPT.replace("return x * scale", "return x * factor").replace("scale = 3.0", "factor = 3.0")
    with fixed_namespace(recorded, path, SCRIPT, renamed) as scope, pytest.raises(Unverifiable, match="free variables"):
        fixed_callable(recorded, scope, path, renamed)


def test_a_bound_method_and_a_partial_keep_their_instance_and_arguments(tmp_path: Path):
    path = str(tmp_path / "trainer.py")
    source = "class Trainer:\n    def __init__(self):\n        self.rate = 2.0\n\n    def update(self, x, y):\n        return x * self.rate + y\n"
    namespace: dict = {}
    exec(compile(source, path, "exec"), namespace)
    trainer = namespace["Trainer"]()
    fun = functools.partial(trainer.update, y=1.0)
    after = source.replace("x * self.rate + y", "x * self.rate - y")
    with fixed_namespace(fun, path, source, after) as scope:
        built, jitted = fixed_callable(fun, scope, path, after)
        assert not jitted and built(3.0) == 5.0


def test_a_fix_that_changes_statements_that_run_the_program_is_not_verified(tmp_path: Path):
    path, namespace = _run(tmp_path)
    after = SCRIPT.replace("range(2)", "range(3)")
    with (
        pytest.raises(Unverifiable, match=r"changes module-level code that runs the program \(line 24 of script.py\)"),
        fixed_namespace(namespace["step"], path, SCRIPT, after),
    ):
        pass


UNCOMMITTED = """\
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MESH = Mesh(np.array(jax.devices()[:2]), ("d",))
DEVICE = NamedSharding(MESH, PartitionSpec())
HOST = DEVICE.with_memory_kind("pinned_host")


@functools.partial(jax.jit, out_shardings=(None, DEVICE))
def step(x, m):
    return x + 1, m * 2



def main():
    total, doubled = step(jnp.ones(4), jax.device_put(jnp.ones(4), HOST))
    print(total.shape)


if __name__ == "__main__":
    main()
"""


@pytest.mark.skipif(
    jax_compat.regime() is not jax_compat.Regime.TYPED or not jax_compat.host_memory_on_this_backend(),
    reason=f"jax {jax.__version__}: the program needs pinned_host memory on the CPU and memory spaces in types",
)
def test_an_argument_passed_uncommitted_lowers_beside_one_sharded_over_several_devices(tmp_path: Path):
    """``step(jnp.ones(4), sharded)``: JAX places the uncommitted array where the sharded one
    is. Recorded with its device, the fixed step would "no longer lower" (incompatible
    devices) though the program runs it; recorded as JAX treats it, the fix is verified."""
    from tests.cli_support import offload_fixer

    program = tmp_path / "pair.py"
    program.write_text(UNCOMMITTED)
    proc = offload_fixer(
        "run", "--fix", str(program), cwd=tmp_path, XLA_FLAGS="--xla_force_host_platform_device_count=2"
    )
    assert "no longer lowers" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "m = jax.device_put(m, jax.memory.Space.Device)" in program.read_text()


def test_compile_fixed_lowers_the_fixed_script_with_the_recorded_call(tmp_path: Path):
    path, namespace = _run(tmp_path)
    (tmp_path / "script.py").write_text(SCRIPT)
    function = FunctionRef("step", path, 11)
    call = AbstractCall(namespace["step"], (jax.ShapeDtypeStruct((4,), jnp.float32),), {}, {})
    fixed = SCRIPT.replace("return helper(x) + 1", "return helper(x) + undefined_name")
    check = compile_fixed({path: fixed}, function, call, "tpu", compile=False, originals={path: SCRIPT})
    assert check.located and not check.lowered and "undefined_name" in check.reason
    check = compile_fixed({path: SCRIPT.replace("+ 1", "+ 2")}, function, call, "tpu", compile=False)
    assert check.confirmed and check.located, check.reason
    assert len(namespace["RUNS"]) == 2
