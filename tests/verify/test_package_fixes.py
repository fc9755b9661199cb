"""A fix in a package lowered from a temporary copy with every fixed file overlaid: relative
imports resolve inside the copy, a jit built inside ``main()`` is jitted again from the run's
record, the user's files are never touched, and what cannot be lowered says ``not verified``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from offload_fixer import jax_compat
from offload_fixer.model import FunctionRef
from offload_fixer.report_file import AbstractCall
from offload_fixer.verify.lowering import compile_fixed

ROOT = Path(__file__).resolve().parents[2]
COMMAND = shutil.which("offload-fixer", path=os.path.dirname(sys.executable))


def _package(tmp_path: Path) -> Path:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("def double(x):\n    return x * 2\n")
    (package / "model.py").write_text(
        "import jax\n\nfrom . import helpers\n\n\ndef step(x):\n    return helpers.double(x)\n"
    )
    (package / "__main__.py").write_text(
        "import jax\n\nfrom .model import step\n\n\ndef main():\n    f = jax.jit(step)\n    f(1.0)\n\n\n"
        'if __name__ == "__main__":\n    main()\n'
    )
    return package


def test_a_package_fix_spanning_two_files_lowers_from_the_overlaid_copy(tmp_path: Path):
    package = _package(tmp_path)
    before = {p.name: p.read_text() for p in package.iterdir()}
    fixed_helpers = "def double(x):\n    return x + x\n"
    # the jit site (inside main()) edited too: the fixed call's out_shardings is evaluated
    fixed_main = before["__main__.py"].replace("jax.jit(step)", "jax.jit(step, out_shardings=None)")
    function = FunctionRef("step", str(package / "model.py"), 6, jit_path=str(package / "__main__.py"), jit_line=7)
    call = AbstractCall(None, (jax.ShapeDtypeStruct((4,), jnp.float32),), {}, {})
    modules = set(sys.modules)
    check = compile_fixed(
        {str(package / "helpers.py"): fixed_helpers, str(package / "__main__.py"): fixed_main},
        function,
        call,
        "tpu",
        compile=False,
        require_safe=True,
    )
    assert check.confirmed and check.located, check.reason
    assert {p.name: p.read_text() for p in package.iterdir()} == before  # the user's files untouched
    assert not [m for m in set(sys.modules) - modules if m.startswith("_offload_fixer_fixed_")]


def test_what_only_the_running_program_gives_is_not_verified(tmp_path: Path):
    package = _package(tmp_path)
    function = FunctionRef("step", str(package / "model.py"), 6, jit_path=str(package / "__main__.py"), jit_line=7)
    args = (jax.ShapeDtypeStruct((4,), jnp.float32),)
    fixed_main = (package / "__main__.py").read_text().replace("jax.jit(step)", "jax.jit(step, out_shardings=local)")
    texts = {str(package / "__main__.py"): fixed_main}
    runtime = compile_fixed(texts, function, AbstractCall(None, args, {}, {}), "tpu", compile=False)
    assert not runtime.located and runtime.reason.startswith("not verified: the jit at __main__.py:7 is built inside")
    assert "`local`" in runtime.reason
    saved = compile_fixed(texts, function, AbstractCall(None, args, {}), "tpu", compile=False)  # fix REPORT
    assert saved.reason.startswith("not verified:") and "no jit options" in saved.reason
    (package / "helpers.py").write_text("def double(x):\n    return x * 2\n\nprint(double(1))\n")
    runs = compile_fixed({}, function, AbstractCall(None, args, {}, {}), "tpu", compile=False, require_safe=True)
    assert runs.reason == "not verified: importing pkg/helpers.py would run the program (statements at module level)"


@pytest.mark.skipif(
    not jax_compat.host_memory_on_this_backend(), reason="the package runs on CPU with pinned_host memory"
)
def test_run_fix_diff_verifies_the_package_fix_with_the_compiler(tpu_compiler, tmp_path: Path):
    """moments_on_host: the step in step.py, its jit inside main() in __main__.py."""
    shutil.copytree(ROOT / "examples" / "training", tmp_path / "examples" / "training")
    module = "examples.training.moments_on_host"
    done = subprocess.run(
        [COMMAND or "offload-fixer", "run", "--fix", "--diff", "-m", module],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    said = done.stdout + done.stderr
    assert "not verified" not in said, said
    # lowered from the overlaid copy and compiled: the moments moved to device in the step hold
    # a few hundred KiB more than the step without its offload (within HBM_FLOOR), so the fix
    # of step.py is verified and shown
    assert "+++ b/examples/training/moments_on_host/step.py" in said, said
    assert "fix refused" not in said, said


def test_a_jit_of_what_a_factory_returns_lowers_from_the_fixed_factory_with_the_recorded_closure(tmp_path: Path):
    """``jax.jit(make_step(scale))`` inside ``main()``: the fixed module's inner ``def``,
    closed over the ``scale`` the run's function held, is lowered; an edit of that jit site
    is not verified so (its options would be the record's, not the fixed call's)."""
    package = tmp_path / "fac"
    package.mkdir()
    (package / "__init__.py").write_text("")
    model = "def make_step(scale):\n    def step(x):\n        return x * scale\n\n    return step\n"
    (package / "model.py").write_text(model)
    main = (
        "import jax\n\nfrom .model import make_step\n\n\ndef main():\n    f = jax.jit(make_step(3.0))\n    f(1.0)\n\n\n"
        'if __name__ == "__main__":\n    main()\n'
    )
    (package / "__main__.py").write_text(main)
    namespace: dict = {}
    exec(compile(model, str(package / "model.py"), "exec"), namespace)
    recorded = jax.jit(namespace["make_step"](3.0))
    function = FunctionRef("step", str(package / "model.py"), 2, jit_path=str(package / "__main__.py"), jit_line=7)
    call = AbstractCall(recorded, (jax.ShapeDtypeStruct((4,), jnp.float32),), {}, {})
    fixed = {str(package / "model.py"): model.replace("return x * scale", "return jnp.asarray(x) * scale")}
    fixed[str(package / "model.py")] = "import jax.numpy as jnp\n\n\n" + fixed[str(package / "model.py")]
    check = compile_fixed(fixed, function, call, "tpu", compile=False, require_safe=True)
    assert check.confirmed and check.located, check.reason
    broken = {str(package / "model.py"): model.replace("return x * scale", "return x * scale * undefined")}
    check = compile_fixed(broken, function, call, "tpu", compile=False, require_safe=True)
    assert check.located and not check.lowered and "undefined" in check.reason  # the fixed code is what lowers
    site = {
        **fixed,
        str(package / "__main__.py"): main.replace("make_step(3.0))", "make_step(3.0), out_shardings=None)"),
    }
    check = compile_fixed(site, function, call, "tpu", compile=False, require_safe=True)
    assert not check.located and "no `jax.jit(step, ...)` call found" in check.reason
