"""The one reading of an import's bindings (``names.import_binding``)."""

from __future__ import annotations

import ast

import pytest

from offload_fixer.static.names import import_binding
from offload_fixer.static.project import _bound_names


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import jax", [("jax", "jax")]),
        ("import jax.numpy", [("jax", "jax")]),
        ("import jax.numpy as jnp", [("jnp", "jax.numpy")]),
        ("from jax import jit", [("jit", "jax.jit")]),
        ("from jax import jit as compile_it, pjit", [("compile_it", "jax.jit"), ("pjit", "jax.pjit")]),
        ("from jax.experimental.pjit import pjit", [("pjit", "jax.experimental.pjit.pjit")]),
        ("from . import utils", [("utils", ".utils")]),
        ("from ..pkg import helper as h", [("h", "..pkg.helper")]),
        ("from jax import *", [("*", "jax.*")]),
    ],
)
def test_an_import_binds_its_local_name_to_a_qualified_name(source, expected):
    (statement,) = ast.parse(source).body
    assert isinstance(statement, (ast.Import, ast.ImportFrom))
    assert [import_binding(statement, alias) for alias in statement.names] == expected
    star_sources: list[tuple[int, str]] = []
    assert list(_bound_names(statement, star_sources)) == [local for local, _ in expected if local != "*"]
    assert star_sources == ([(statement.level, statement.module)] if expected[0][0] == "*" else [])  # type: ignore[union-attr]
