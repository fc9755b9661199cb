"""``offload-fixer check --fix`` over the whole ``examples/training`` tree, as a user runs it
from the tree's root: every package's findings fixed in one run (fixing one file in memory
makes a module that imports it be checked again against the fixed text), the same files a run
per package writes, nothing left for a second run, and each package, run as
``python -m PACKAGE``, prints what it printed before."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from offload_fixer import jax_compat
from offload_fixer.exit_codes import ExitCode
from tests.cli_support import REPO, offload_fixer

TRAINING = REPO / "examples" / "training"
PACKAGES = sorted(main.parent.name for main in TRAINING.glob("*/__main__.py"))
FIX = ("check", "--fix", "--unsafe-fixes")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not jax_compat.host_memory_on_this_backend(), reason="the programs need pinned_host memory"),
    pytest.mark.skipif(
        jax_compat.regime() is not jax_compat.Regime.TYPED,
        reason="their broken steps trigger error 1200 from JAX 0.7.1",
    ),
]


def _copy(source: Path, into: Path) -> Path:
    shutil.copytree(source, into, ignore=shutil.ignore_patterns("__pycache__", ".offload-fixer-cache"))
    return into


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.py"))}


def _run_package(package: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", package],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        check=False,
    )


def test_one_check_fix_over_the_tree_fixes_every_package(tmp_path: Path):
    pristine = _copy(TRAINING, tmp_path / "pristine")
    tree = _copy(TRAINING, tmp_path / "training")
    found = offload_fixer("check", ".", cwd=tree)
    assert found.returncode == ExitCode.FINDINGS, found.stdout + found.stderr
    count = int(re.search(r"^Found (\d+) problems", found.stdout, re.M).group(1))

    fixed = offload_fixer(*FIX, ".", cwd=tree)
    said = fixed.stdout + fixed.stderr
    assert fixed.returncode == ExitCode.CLEAN, said
    assert "refused" not in said
    assert f"Found {count} problems ({count} fixed, 0 remaining)." in fixed.stdout, said
    once = _tree(tree)
    original = _tree(pristine)
    assert {path.split("/")[0] for path in once if once[path] != original[path]} == set(PACKAGES)

    again = offload_fixer(*FIX, ".", cwd=tree)
    assert again.returncode == ExitCode.CLEAN and "All checks passed!" in again.stdout, again.stdout + again.stderr
    assert _tree(tree) == once, "a second run must find nothing left to fix"

    for package in PACKAGES:
        alone = _copy(TRAINING / package, tmp_path / f"{package}-alone" / package).parent
        by_itself = offload_fixer(*FIX, package, cwd=alone)
        assert by_itself.returncode == ExitCode.CLEAN, by_itself.stdout + by_itself.stderr
        assert _tree(alone) == {path: data for path, data in once.items() if path.startswith(f"{package}/")}

        before, after = _run_package(package, pristine), _run_package(package, tree)
        assert before.returncode == 0, before.stderr
        assert after.returncode == 0, after.stderr
        assert after.stdout == before.stdout, package


def test_a_package_whose_fixed_module_cannot_be_written_is_reported_unfixed(tmp_path: Path):
    """The fix of ``remat_offload`` edits ``stages.py`` alone, for findings in both modules: with
    that file read-only, nothing is written, and both findings stay, neither marked ``[*]``."""
    tree = _copy(TRAINING / "remat_offload", tmp_path / "remat_offload").parent
    stages = tree / "remat_offload" / "stages.py"
    stages.chmod(0o444)
    original = _tree(tree)
    fixed = offload_fixer(*FIX, ".", cwd=tree)
    assert fixed.returncode == ExitCode.FIX_REFUSED, fixed.stdout + fixed.stderr
    assert "remat_offload/stages.py: fix refused: is read-only" in fixed.stderr
    assert _tree(tree) == original
    reported = re.findall(r"^(\S+):\d+:\d+: (OFL\d{4}) ", fixed.stdout, re.M)
    assert sorted(reported) == [("remat_offload/__main__.py", "OFL1200"), ("remat_offload/stages.py", "OFL1201")]
    assert "[*]" not in fixed.stdout and "fixable" not in fixed.stdout
    assert fixed.stdout.count("not written: is read-only") == 2
