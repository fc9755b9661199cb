"""What the command line imports: ``check`` and ``--version`` load only what they use.

Start-up is most of what a one-file check costs (a pre-commit hook, an editor's save), so the
fixes, the codemods (``libcst.codemod`` alone imports ``unittest`` and ``multiprocessing``),
the language server, JAX, nbformat and the report formats not printed are imported where they
are used. Each case runs the installed command as a user does, with Python's own import log
(``PYTHONPROFILEIMPORTTIME``), and names the modules it must never load. Speed itself is
measured by ``benchmarks/startup.py``, never here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_support import offload_fixer

CLEAN = '''"""A module with no jit: what most files of a project are."""

import json


def load(path):
    with open(path) as handle:
        return json.load(handle)
'''

JITTED_WITHOUT_FINDING = """import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    y = jax.device_put(jnp.sin(x), jax.memory.Space.Host)
    return jax.device_put(y, jax.memory.Space.Device) * 2
"""

NEVER_AT_START_UP = (
    "jax",
    "jaxlib",
    "nbformat",
    "pygls",
    "lsprotocol",
    "offload_fixer.fixes",
    "offload_fixer.codemods",
    "offload_fixer.lsp",
    "offload_fixer.runner",
    "offload_fixer.analysis",
    "offload_fixer.ir",
    "offload_fixer.xla",
    "offload_fixer.verify",
    "offload_fixer.explain",
    "libcst.codemod",
    "libcst.matchers",
    "multiprocessing",
    "concurrent.futures",
)
"""Loaded by no ``check`` that fixes nothing and finds nothing, whatever the file holds."""


def imported(*args: str, cwd: Path) -> list[str]:
    """Every module ``offload-fixer ARGS`` imports, in Python's own import log."""
    done = offload_fixer(*args, cwd=cwd, PYTHONPROFILEIMPORTTIME="1")
    assert done.returncode == 0, done.stdout + done.stderr
    log = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert log, "Python wrote no import log"
    return [line.rsplit("|", 1)[1].strip() for line in log[1:]]


def loaded(modules: list[str], *packages: str) -> list[str]:
    return sorted({m for m in modules for p in packages if m == p or m.startswith(p + ".")})


def test_checking_a_file_without_jit_imports_neither_libcst_nor_the_rule_pages(tmp_path: Path) -> None:
    (tmp_path / "clean.py").write_text(CLEAN)
    modules = imported("check", "clean.py", cwd=tmp_path)
    assert "offload_fixer.static.api" in modules  # the log is of the check itself
    assert loaded(modules, *NEVER_AT_START_UP, "libcst", "offload_fixer.rules", "importlib.metadata") == []
    # neither the notebook reader (no notebook among the files) nor the SARIF writer (not
    # printed), nor difflib (for a misspelt setting's hint and a notebook's edits)
    assert loaded(modules, "offload_fixer.notebook", "offload_fixer.report.sarif", "difflib") == []


def test_checking_a_jitted_file_without_a_finding_parses_it_but_loads_no_fix_machinery(tmp_path: Path) -> None:
    (tmp_path / "step.py").write_text(JITTED_WITHOUT_FINDING)
    modules = imported("check", "step.py", cwd=tmp_path)
    assert "libcst" in modules and "offload_fixer.static.interpreter" in modules  # it was analysed
    assert loaded(modules, *NEVER_AT_START_UP) == []


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_load_no_checker(tmp_path: Path, flag: str) -> None:
    modules = imported(flag, cwd=tmp_path)
    assert "click" in modules
    assert loaded(modules, *NEVER_AT_START_UP, "libcst", "offload_fixer.static", "importlib.metadata") == []
