"""Syntax of any supported Python, whatever the interpreter: ``target-version`` (from
``requires-python`` by default) says which Python a file is written for; a file written for a
newer Python than the one offload-fixer runs under is read by libcst's grammar and analysed,
through the installed command as a user runs it."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from offload_fixer.exit_codes import ExitCode
from offload_fixer.source.python_version import from_requires_python, parse_target_version
from tests.cli_support import offload_fixer

PEP_695 = textwrap.dedent(
    """\
    import functools

    import jax
    from jax.sharding import SingleDeviceSharding

    HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


    class Box[T]:
        def __init__(self, value: T) -> None:
            self.value = value


    type Pair = tuple[jax.Array, jax.Array]


    @functools.partial(jax.jit, in_shardings=HOST)
    def double(x):
        return x * 2
    """
)
"""Python 3.12 syntax (PEP 695 type parameters and a ``type`` statement) around error 1200."""
NO_JIT = "class Box[T]:\n    pass\n"
older_python = pytest.mark.skipif(sys.version_info >= (3, 12), reason="needs an interpreter older than 3.12")


@pytest.mark.parametrize(
    "spec, target",
    [(">=3.10", "py310"), ("~=3.11", "py311"), (">=3.10,<4", "py310"), (">3.12", "py312"), ("==3.13.*", "py313")],
)
def test_requires_python_gives_its_lowest_version(spec, target):
    assert from_requires_python(spec) == target


def test_requires_python_without_a_lower_bound_says_nothing():
    assert from_requires_python("<4") is None
    with pytest.raises(ValueError, match="py312"):
        parse_target_version("3.12")


def test_a_312_file_is_analysed_and_fixed_under_any_python(tmp_path: Path):
    (tmp_path / "boxes.py").write_text(PEP_695)
    (tmp_path / "plain.py").write_text(NO_JIT)
    named = offload_fixer("check", "--format", "concise", "boxes.py", "plain.py", cwd=tmp_path)
    assert named.returncode == ExitCode.FINDINGS, named.stdout + named.stderr
    assert named.stdout.startswith("boxes.py:17:29: OFL1200 [*] [error]"), named.stdout
    walked = offload_fixer("check", "--format", "concise", ".", cwd=tmp_path)
    assert walked.stdout == named.stdout and walked.returncode == ExitCode.FINDINGS
    diff = offload_fixer("check", "--diff", "boxes.py", cwd=tmp_path)
    assert diff.returncode == ExitCode.FINDINGS and "+    x = jax.device_put(x" in diff.stdout, (
        diff.stdout + diff.stderr
    )
    fixed = offload_fixer("check", "--fix", "boxes.py", cwd=tmp_path)
    assert fixed.returncode == ExitCode.CLEAN, fixed.stdout + fixed.stderr
    assert "class Box[T]:" in (tmp_path / "boxes.py").read_text()
    # fixed again from the results the first check kept, walking the tree: the status of what is left (none)
    (tmp_path / "boxes.py").write_text(PEP_695)
    assert offload_fixer("check", "boxes.py", cwd=tmp_path).returncode == ExitCode.FINDINGS
    walked = offload_fixer("check", "--fix", ".", cwd=tmp_path)
    assert walked.returncode == ExitCode.CLEAN, walked.stdout + walked.stderr
    assert walked.stdout == "Found 2 problems (2 fixed, 0 remaining).\n"


@older_python
def test_a_file_written_for_this_python_is_judged_by_cpython(tmp_path: Path):
    """``requires-python = ">=3.10"`` says the file runs on 3.10: there a PEP 695 class is a
    syntax error, and the message says why; ``target-version`` (flag, table or ``--config``)
    says otherwise."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nrequires-python = ">=3.10"\n')
    (tmp_path / "plain.py").write_text(NO_JIT)
    (tmp_path / "boxes.py").write_text(PEP_695)
    refused = offload_fixer("check", "plain.py", "boxes.py", cwd=tmp_path)
    assert refused.returncode == ExitCode.INPUT_ERROR
    assert refused.stdout.splitlines()[:2] == [
        "boxes.py:9:10: error: invalid syntax for Python 3.10 (the file's `target-version`, or its project's "
        "`requires-python`): this is a newer Python's syntax",
        "plain.py:1:10: error: invalid syntax for Python 3.10 (the file's `target-version`, or its project's "
        "`requires-python`): this is a newer Python's syntax",
    ], refused.stdout
    for flags in (["--target-version", "py312"], ["--config", 'target-version = "py312"']):
        assert offload_fixer("check", *flags, "plain.py", cwd=tmp_path).returncode == ExitCode.CLEAN
    (tmp_path / "pyproject.toml").write_text('[tool.offload-fixer]\ntarget-version = "py312"\n')
    assert offload_fixer("check", "plain.py", cwd=tmp_path).returncode == ExitCode.CLEAN


def test_a_real_syntax_error_is_one_in_every_version(tmp_path: Path):
    (tmp_path / "broken.py").write_text("class Box[T:\n    pass\n")
    proc = offload_fixer("check", "broken.py", cwd=tmp_path)
    assert proc.returncode == ExitCode.INPUT_ERROR and proc.stdout.startswith("broken.py:1:"), proc.stdout
    bad = offload_fixer("check", "--target-version", "py399", "broken.py", cwd=tmp_path)
    assert bad.returncode == ExitCode.USAGE and "py312" in bad.stderr


def test_what_the_compiler_refuses_in_every_version_stays_an_error(tmp_path: Path):
    """``nonlocal`` without a binding parses (libcst and CPython's parser read it) but no
    Python compiles it: not a newer Python's syntax."""
    (tmp_path / "scope.py").write_text("def f():\n    nonlocal x\n")
    proc = offload_fixer("check", "scope.py", cwd=tmp_path)
    assert proc.returncode == ExitCode.INPUT_ERROR and "no binding for nonlocal 'x' found" in proc.stdout, proc.stdout


MATCH = "def kind(x):\n    match x:\n        case 1:\n            return 'one'\n    return 'other'\n"
"""A ``match`` statement (Python 3.10), which CPython 3.10 and newer all parse."""


def test_syntax_newer_than_the_target_is_an_error_under_a_newer_python_too(tmp_path: Path):
    """ruff reports syntax newer than ``target-version`` as a syntax error, whatever it runs
    under; so does the check, where this interpreter reads that syntax too."""
    (tmp_path / "kinds.py").write_text(MATCH)
    refused = offload_fixer("check", "--target-version", "py39", "kinds.py", cwd=tmp_path)
    assert refused.returncode == ExitCode.INPUT_ERROR
    assert refused.stdout.splitlines()[0] == (
        "kinds.py:2:5: error: Pattern matching is only supported in Python 3.10 and greater; the file is written "
        "for Python 3.9 (its `target-version`, or its project's `requires-python`)"
    ), refused.stdout
    assert offload_fixer("check", "--target-version", "py310", "kinds.py", cwd=tmp_path).returncode == ExitCode.CLEAN


@pytest.mark.skipif(
    sys.version_info < (3, 11),
    reason="a target newer than the interpreter is judged by libcst's grammar, any version's",
)
def test_a_312_file_with_an_older_target_is_an_error_under_3_11_and_newer(tmp_path: Path):
    (tmp_path / "boxes.py").write_text(PEP_695)
    for paths in (["boxes.py"], ["."]):
        refused = offload_fixer("check", "--target-version", "py311", *paths, cwd=tmp_path)
        assert refused.returncode == ExitCode.INPUT_ERROR, refused.stdout
        line = refused.stdout.splitlines()[0]
        assert line.startswith("boxes.py:9:") and "Python 3.11 (" in line, line
