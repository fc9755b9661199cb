"""A fix never reads a name the module does not bind when it runs
(:mod:`offload_fixer.fixes.introduced_names`), and the fixer adds the import it needs."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from offload_fixer.fixes.introduced_names import module_bindings, unbound_reads

BEFORE = "def step(x):\n    return x\n"
AFTER = "def step(x):\n    return jax.device_put(x, jax.memory.Space.Device), first, sum\n"


def _unbound(head: str) -> list[str]:
    whole = ast.parse(textwrap.dedent(head) + AFTER)
    return unbound_reads(whole, ast.parse(BEFORE).body, ast.parse(AFTER).body, AFTER)


def test_names_only_a_type_checker_or_another_function_sees_are_unbound() -> None:
    assert _unbound("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import jax\nfirst = 1\n") == ["jax"]
    assert _unbound("def main():\n    import jax\n    global first\n    first = 1\n") == ["jax"]
    assert _unbound("import jax.numpy as jnp\nfirst = 1\n") == ["jax"]


def test_names_the_module_binds_when_it_runs_are_bound() -> None:
    assert _unbound("import typing\nif typing.TYPE_CHECKING:\n    pass\nelse:\n    import jax\nfirst = 1\n") == []
    assert (
        _unbound("try:\n    import jax\nexcept ImportError:\n    jax = None\nfor first in range(2):\n    pass\n") == []
    )
    assert _unbound("import jax.numpy\n[first := 1 for _ in ()]\n") == []
    assert _unbound("from jax import *\n") == []  # a star import binds what cannot be told: no verdict


def test_names_an_enclosing_function_binds_are_bound() -> None:
    inner = "def outer(jax, first):\n    def step(x):\n        return jax.device_put(x), first\n    return step\n"
    whole = ast.parse(inner)
    assert unbound_reads(whole, [], whole.body, inner) == []


def test_every_kind_of_top_level_binding_is_read() -> None:
    text = textwrap.dedent(
        """\
        import a.b as c
        from d import e as f, g
        h: int = 1
        i: int
        j += 1
        with open("x") as (k, l):
            pass
        match m:
            case [n, *o] | {"p": n, **o}:
                pass
        class Q:
            r = 1
        @decorator
        def s():
            global t
        """
    )
    bound = module_bindings(ast.parse(text))
    assert bound is not None
    assert {"c", "f", "g", "h", "j", "k", "l", "n", "o", "Q", "s", "t", "__name__"} <= bound
    assert not {"a", "d", "e", "i", "r", "m"} & bound


FIXED_BY_CHECK = """\
from __future__ import annotations

from typing import TYPE_CHECKING

from jax import device_put, devices, jit
from jax.sharding import SingleDeviceSharding

if TYPE_CHECKING:
    import jax

HOST = SingleDeviceSharding(devices()[0], memory_kind="pinned_host")


@jit
def step(x: jax.Array):
    h = device_put(x, HOST)
    return x * 2, h + 1


if __name__ == "__main__":
    from jax import numpy as np_

    print(step(np_.ones(4)))
"""


@pytest.mark.skipif(sys.version_info < (3, 10), reason="the program's annotations")
def test_check_fix_adds_the_import_its_spelling_needs_and_the_program_runs(tmp_path: Path) -> None:
    from offload_fixer import jax_compat

    if not jax_compat.host_memory_on_this_backend():
        pytest.skip("the program needs pinned_host memory (JAX >= 0.5 on CPU)")
    program = tmp_path / "train.py"
    program.write_text(FIXED_BY_CHECK)
    command = [str(Path(sys.executable).parent / "offload-fixer"), "check", "--fix", "--jax-version", "0.10.2"]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([*command, program.name], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    fixed = program.read_text()
    assert "jax.memory.Space.Device" in fixed and "\nimport jax\n" in fixed
    ran = subprocess.run([sys.executable, program.name], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr[-2000:]
