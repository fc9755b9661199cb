"""The training packages (``examples/training/``), fixed as a user fixes them: ``offload-fixer run
--fix --strategy S -m examples.training.PKG`` in a copy, for each strategy. Afterwards neither
the dynamic analysis nor the static check finds an OFL1200, the package prints what it printed
before, a second ``--fix`` changes nothing, and the released TPU compiler compiles every jit the
package compiles, as the analysis predicts (``run_program(confirm=True)``). Strategies that
write the same files are checked once.

The jit sites are in ``__main__.py`` and the functions in other modules: the fixes edit the
functions' modules."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from offload_fixer import jax_compat
from offload_fixer.runner import run_program
from offload_fixer.static import check_paths

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted(main.parent.name for main in (ROOT / "examples" / "training").glob("*/__main__.py"))
COMMAND = shutil.which("offload-fixer", path=os.path.dirname(sys.executable))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not jax_compat.host_memory_on_this_backend(), reason="the packages need pinned_host memory"),
    pytest.mark.skipif(jax_compat.regime() is not jax_compat.Regime.TYPED,
                       reason="the packages' broken steps trigger error 1200 from JAX 0.7.1"),
    pytest.mark.skipif(COMMAND is None, reason="the offload-fixer command is not installed in this environment"),
]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.py"))}


@contextlib.contextmanager
def _own_modules(cwd: Path) -> Iterator[None]:
    """Import ``examples.training`` from ``cwd`` in this process, then forget it: another test
    (or the repository's own copy) may have imported the same module names."""
    def ours() -> list[str]:
        return [name for name in sys.modules if name == "examples" or name.startswith("examples.")]

    saved = {name: sys.modules.pop(name) for name in ours()}
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(previous)
        for name in ours():
            del sys.modules[name]
        sys.modules.update(saved)


@pytest.mark.parametrize("package", PACKAGES)
def test_fix_training_package(request: pytest.FixtureRequest, tmp_path: Path, package: str):
    module = f"examples.training.{package}"
    pristine = tmp_path / "original"
    shutil.copytree(ROOT / "examples" / "training", pristine / "examples" / "training")
    before = _run(sys.executable, "-m", module, cwd=pristine)
    assert before.returncode == 0, before.stderr
    original = _tree(pristine)

    distinct: dict[tuple, tuple[str, Path]] = {}
    for strategy in ("auto", "device", "host"):
        copy = tmp_path / strategy
        shutil.copytree(pristine, copy)
        fixed = _run(COMMAND, "run", "--fix", "--strategy", strategy, "-m", module, cwd=copy)
        assert "Traceback" not in fixed.stderr, fixed.stderr
        tree = _tree(copy)
        assert tree != original, (strategy, fixed.stdout + fixed.stderr)
        distinct.setdefault(tuple(sorted(tree.items())), (strategy, copy))

    for strategy, copy in distinct.values():
        after = _run(sys.executable, "-m", module, cwd=copy)
        assert after.returncode == 0, after.stderr
        assert after.stdout == before.stdout, strategy
        static = [d for r in check_paths([str(copy / "examples" / "training" / package)]) for d in r.diagnostics]
        assert not [d for d in static if d.code == "OFL1200"], (strategy, static)

        request.getfixturevalue("tpu_compiler")  # the confirmation below compiles with it
        with _own_modules(copy), contextlib.redirect_stdout(io.StringIO()):
            result = run_program(module, [], target="tpu", is_module=True, confirm=True)
        assert result.program_exit_code == 0, result.program_exception
        assert not [d for d in result.diagnostics if d.code == "OFL1200"], strategy
        assert result.reports
        for report in result.reports:
            assert report.xla is not None and report.xla.outcome == "compiled", (strategy, report.function, report.xla)
            assert not report.unpredicted, (strategy, report.unpredicted)

        fixed_once = _tree(copy)
        again = _run(COMMAND, "run", "--fix", "--strategy", strategy, "-m", module, cwd=copy)
        assert again.returncode == 0, again.stdout + again.stderr
        assert _tree(copy) == fixed_once, f"a second fix must change nothing ({strategy})"
