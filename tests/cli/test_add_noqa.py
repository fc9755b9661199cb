"""``check --add-noqa``: ruff's directive written on each line a finding points at, the rest
of the file byte for byte, through the installed command."""

from __future__ import annotations

import json
from pathlib import Path

from offload_fixer.exit_codes import ExitCode
from tests.cli.programs import BROKEN
from tests.cli_support import offload_fixer


def test_add_noqa_writes_the_directive_and_the_check_passes(tmp_path: Path):
    path = tmp_path / "train.py"
    original = BROKEN.replace("\n", "\r\n").encode()  # line ends are kept as they are
    path.write_bytes(original)
    added = offload_fixer("check", "--add-noqa", "train.py", cwd=tmp_path)
    assert (added.returncode, added.stdout, added.stderr) == (ExitCode.CLEAN, "", "Added 2 noqa directives.\n")
    after = path.read_bytes()
    line = b"@functools.partial(jax.jit, in_shardings=HOST)"
    compute = b"# keep this comment"  # the multiply on the host argument: OFL1201, after the comment as ruff puts it
    assert after == original.replace(line, line + b"  # noqa: OFL1200").replace(compute, compute + b"  # noqa: OFL1201")
    assert offload_fixer("check", "train.py", cwd=tmp_path).stdout == "All checks passed! (1 file checked)\n"
    again = offload_fixer("check", "--add-noqa", "train.py", cwd=tmp_path)
    assert (again.returncode, again.stderr) == (ExitCode.CLEAN, "") and path.read_bytes() == after


def test_add_noqa_merges_into_another_tools_directive_and_skips_strings(tmp_path: Path):
    source = BROKEN.replace(
        "@functools.partial(jax.jit, in_shardings=HOST)",
        '@functools.partial(jax.jit, in_shardings=HOST)  # noqa: E501\ndef doc(x):\n    """a\n    b"""\n    return x\n\n\n'
        "@functools.partial(jax.jit, in_shardings=HOST)",
    )
    path = tmp_path / "train.py"
    path.write_text(source)
    # JAX 0.10.2's semantics: its typed memory kinds make both returns of a host argument errors
    added = offload_fixer("check", "--add-noqa", "--jax-version", "0.10.2", "train.py", cwd=tmp_path)
    assert added.returncode == ExitCode.CLEAN, added.stderr
    text = path.read_text()
    assert "in_shardings=HOST)  # noqa: E501, OFL1200\ndef doc(x):" in text, text
    assert text.count("# noqa: OFL1200") == 1
    assert offload_fixer("check", "--jax-version", "0.10.2", "train.py", cwd=tmp_path).returncode == ExitCode.CLEAN


def test_add_noqa_writes_into_a_notebook_cell_and_keeps_every_other_byte(tmp_path: Path):
    setup, broken = BROKEN.split("\n\n\n@functools")
    cells = [
        {"cell_type": "markdown", "id": "notes", "metadata": {}, "source": ["# Ünïcode notes\n", "kept as written"]},
        {
            "cell_type": "code",
            "execution_count": 1,
            "id": "setup",
            "metadata": {},
            "outputs": [],
            "source": setup.splitlines(True),
        },
        {
            "cell_type": "code",
            "execution_count": None,
            "id": "step",
            "metadata": {"tags": ["x"]},
            "outputs": [],
            "source": "@functools" + broken,
        },
    ]
    notebook = {
        "cells": cells,
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "train.ipynb"
    original = json.dumps(notebook, indent=2, ensure_ascii=False).encode()  # not nbformat's own layout
    path.write_bytes(original)
    added = offload_fixer("check", "--add-noqa", "train.ipynb", cwd=tmp_path)
    assert (added.returncode, added.stdout, added.stderr) == (ExitCode.CLEAN, "", "Added 2 noqa directives.\n")
    line = b"@functools.partial(jax.jit, in_shardings=HOST)"
    computed = b"return x * 2  # keep this comment"  # the host compute (OFL1201), after the comment
    expected = original.replace(line, line + b"  # noqa: OFL1200").replace(computed, computed + b"  # noqa: OFL1201")
    assert path.read_bytes() == expected
    assert offload_fixer("check", "train.ipynb", cwd=tmp_path).stdout == "All checks passed! (1 file checked)\n"
    again = offload_fixer("check", "--add-noqa", "train.ipynb", cwd=tmp_path)
    assert (again.returncode, again.stderr) == (ExitCode.CLEAN, "")


def test_add_noqa_names_a_file_it_could_not_check(tmp_path: Path):
    (tmp_path / "broken.py").write_text("def f(:\n")
    done = offload_fixer("check", "--add-noqa", "broken.py", cwd=tmp_path)
    assert done.returncode == ExitCode.INPUT_ERROR
    assert done.stderr.startswith("offload-fixer: broken.py: no noqa added: "), done.stderr
