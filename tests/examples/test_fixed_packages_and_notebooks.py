"""The training packages (``examples/training/``) and the example notebooks, fixed as a user
fixes them, with each strategy, in a copy: ``offload-fixer run --fix --strategy S -m
examples.training.PKG`` (the jit sites are in ``__main__.py``, the functions in other modules:
the fixes edit the functions' modules) and ``offload-fixer check --fix --strategy S NB.ipynb``.
Afterwards neither the dynamic analysis nor the static check finds an OFL1200, the program
prints what it printed before, a second ``--fix`` changes nothing, and the released TPU
compiler compiles every jit the program compiles, as the analysis predicts
(``run_program(confirm=True)``). Strategies that write the same files are checked once; a
strategy that declines (its fix would return host state in device memory, and the jit site
that could keep it host is in another module; or it would abort the program) must say why."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from offload_fixer import jax_compat
from offload_fixer.exit_codes import ExitCode
from offload_fixer.model import STRATEGIES
from offload_fixer.runner import run_program
from offload_fixer.static import check_paths

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted(main.parent.name for main in (ROOT / "examples" / "training").glob("*/__main__.py"))
NOTEBOOKS = sorted(path.name for path in (ROOT / "examples").glob("*.ipynb"))
COMMAND = shutil.which("offload-fixer", path=os.path.dirname(sys.executable))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not jax_compat.host_memory_on_this_backend(), reason="the programs need pinned_host memory"),
    pytest.mark.skipif(
        jax_compat.regime() is not jax_compat.Regime.TYPED,
        reason="their broken steps trigger error 1200 from JAX 0.7.1",
    ),
    pytest.mark.skipif(COMMAND is None, reason="the offload-fixer command is not installed in this environment"),
]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(args), cwd=cwd, capture_output=True, text=True, timeout=600, env={**os.environ, "JAX_PLATFORMS": "cpu"}
    )


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.suffix in (".py", ".ipynb")}


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


def _script(notebook: Path) -> Path:
    """The notebook's code cells, top to bottom, as the kernel runs them, without the IPython
    lines (``%load_ext``: the extension only reports)."""
    import nbformat

    cells = [cell.source for cell in nbformat.read(notebook, as_version=4).cells if cell.cell_type == "code"]
    lines = [line for cell in cells for line in cell.splitlines() if not line.lstrip().startswith(("%", "!"))]
    script = notebook.with_suffix(".py")
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return script


def _fixed_copies(
    tmp_path: Path, populate: Callable[[Path], object], fix: list[str]
) -> tuple[Path, list[tuple[str, Path]]]:
    """A pristine directory (``populate`` fills it), and one copy of it fixed by
    ``offload-fixer COMMAND --fix --strategy S ARGS...`` (``fix``: COMMAND, ARGS...) per
    strategy whose edits differ from the others'."""
    pristine = tmp_path / "original"
    pristine.mkdir()
    populate(pristine)
    original = _tree(pristine)
    distinct: dict[tuple, tuple[str, Path]] = {}
    for strategy in STRATEGIES:
        copy = tmp_path / strategy
        shutil.copytree(pristine, copy)
        fixed = _run(COMMAND, fix[0], "--fix", "--strategy", strategy, *fix[1:], cwd=copy)
        assert "Traceback" not in fixed.stderr, fixed.stderr
        tree = _tree(copy)
        if tree == original:
            # declined, never silently: a fix that would drop the user's offload (the state
            # returned in device memory) is offered as unsafe, with its reason; one that would
            # defeat it (more HBM than no offload) is refused, with the compiler's figures; one
            # whose donated host state JAX would give to a device output (moments_on_host's
            # `train_step` under --strategy device: no out_shardings) is refused as the abort
            # it would be when called
            said = fixed.stdout + fixed.stderr
            assert any(
                reason in said
                for reason in ("unsafe fix", "it would defeat the offload it repairs", "would abort when it runs")
            ), (strategy, said)
            continue
        distinct.setdefault(tuple(sorted(tree.items())), (strategy, copy))
    assert distinct, "no strategy fixes it"
    return pristine, list(distinct.values())


def _compiles_as_predicted(request: pytest.FixtureRequest, program: str, cwd: Path, is_module: bool) -> None:
    request.getfixturevalue("tpu_compiler")  # the confirmation compiles with it
    with _own_modules(cwd), contextlib.redirect_stdout(io.StringIO()):
        result = run_program(program, [], target="tpu", is_module=is_module, confirm=True)
    assert result.program_exit_code == 0, result.program_exception
    assert not [d for d in result.diagnostics if d.code == "OFL1200"]
    assert result.reports
    for report in result.reports:
        assert report.xla is not None and report.xla.outcome == "compiled", (report.function, report.xla)
        assert not report.unpredicted, report.unpredicted


def _no_second_fix(copy: Path, fix: list[str], strategy: str) -> None:
    fixed_once = _tree(copy)
    again = _run(COMMAND, fix[0], "--fix", "--strategy", strategy, *fix[1:], cwd=copy)
    left = set(re.findall(r":\d+:\d+: (OFL\d{4}) ", again.stdout))
    # `device` returns the host state in device memory, as asked: OFL1211 says the state
    # lives on device from the first step on, which is what that strategy chose
    asked = strategy == "device" and left == {"OFL1211"} and again.returncode == ExitCode.FINDINGS
    assert again.returncode == 0 or asked, again.stdout + again.stderr
    assert _tree(copy) == fixed_once, f"a second fix must change nothing ({strategy})"


def _static_findings(path: Path) -> list:
    return [d for result in check_paths([str(path)]) for d in result.diagnostics if d.code == "OFL1200"]


@pytest.mark.parametrize("package", PACKAGES)
def test_fix_training_package(request: pytest.FixtureRequest, tmp_path: Path, package: str):
    module = f"examples.training.{package}"
    fix = ["run", "-m", module]
    pristine, copies = _fixed_copies(
        tmp_path, lambda into: shutil.copytree(ROOT / "examples" / "training", into / "examples" / "training"), fix
    )
    before = _run(sys.executable, "-m", module, cwd=pristine)
    assert before.returncode == 0, before.stderr
    for strategy, copy in copies:
        after = _run(sys.executable, "-m", module, cwd=copy)
        assert after.returncode == 0, after.stderr
        assert after.stdout == before.stdout, strategy
        assert not _static_findings(copy / "examples" / "training" / package), strategy
        _compiles_as_predicted(request, module, copy, is_module=True)
        _no_second_fix(copy, fix, strategy)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_fix_notebook(request: pytest.FixtureRequest, tmp_path: Path, name: str):
    pytest.importorskip("nbformat")
    fix = ["check", name]
    pristine, copies = _fixed_copies(tmp_path, lambda into: shutil.copyfile(ROOT / "examples" / name, into / name), fix)
    before = _run(sys.executable, str(_script(pristine / name)), cwd=pristine)
    assert before.returncode == 0, before.stderr
    for strategy, copy in copies:
        script = _script(copy / name)
        after = _run(sys.executable, str(script), cwd=copy)
        assert after.returncode == 0, after.stderr
        assert after.stdout == before.stdout, strategy
        assert not _static_findings(copy / name), strategy
        _compiles_as_predicted(request, str(script), copy, is_module=False)
        script.unlink()
        _no_second_fix(copy, fix, strategy)
