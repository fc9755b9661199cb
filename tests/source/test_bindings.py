"""The one binding collector, read by both the static check and the codemods."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from offload_fixer.codemods.source_facts import SourceFacts
from offload_fixer.source.bindings import BindingCollector, dotted_name, parameter_names
from offload_fixer.static.interpreter import Interpreter

SOURCE = textwrap.dedent("""\
    import jax
    import jax.numpy
    import jax.numpy as jnp
    from jax import jit as j
    from ..pkg import helper
    from . import sibling
    from functools import *
    host: object
    size: int = 3
    a = b = jnp.zeros(size)
    first, *rest = (1, 2, 3)
    size += 1
    del rest

    def step(x):
        inner = x
        return inner

    @j
    class Model:
        pass

    if jax:
        chosen = 1
    for item in range(3):
        pass
    with open("f") as stream:
        pass
    try:
        pass
    except OSError as error:
        global counted
    """)


def collected() -> BindingCollector:
    return BindingCollector().collect(list(cst.parse_module(SOURCE).body))


def test_each_binding_has_its_kind_statement_and_qualified_name() -> None:
    found = collected()
    kinds = {
        name: [(b.kind, b.index, b.nested, b.qualname) for b in bindings] for name, bindings in found.bindings.items()
    }
    assert kinds["jax"] == [("import", 0, False, "jax"), ("import", 1, False, "jax")]
    assert kinds["jnp"] == [("import", 2, False, "jax.numpy")]
    assert kinds["j"] == [("import", 3, False, "jax.jit")]
    assert kinds["helper"] == [("import", 4, False, "..pkg.helper")]
    assert kinds["sibling"] == [("import", 5, False, ".sibling")]
    assert found.star_sources == [(0, "functools")]
    assert kinds["host"] == [("annotation", 7, False, "")]
    assert [b.kind for b in found.bindings["size"]] == ["assign", "other"]
    assert [b.kind for b in found.bindings["a"]] == [b.kind for b in found.bindings["b"]] == ["assign"]
    assert found.bindings["a"][0].value is found.bindings["b"][0].value
    assert [b.kind for b in found.bindings["rest"]] == ["other", "other"]  # unpacked, then deleted
    assert kinds["step"] == [("def", 13, False, "")] and "inner" not in kinds  # not into the function
    assert kinds["Model"] == [("class", 14, False, "")]
    for name in ("chosen", "item", "stream", "error"):
        assert found.bindings[name][0].nested, name
    assert found.declared == {"counted"}


def test_a_binding_knows_the_clause_that_writes_it() -> None:
    (error,) = collected().bindings["error"]
    assert isinstance(error.site, cst.ExceptHandler) and isinstance(error.node, cst.Try)
    assert error.value is None


@pytest.mark.parametrize(
    ("code", "name"),
    [("a", "a"), ("a.b.c", "a.b.c"), ("f(x).y", None), ("x[0].y", None), ("(a + b).c", None), ("f(x)", None)],
)
def test_dotted_names_are_names_and_attribute_chains_only(code: str, name: str | None) -> None:
    assert dotted_name(cst.parse_expression(code)) == name


def test_parameters_include_the_starred_ones() -> None:
    (function,) = cst.parse_module("def f(a, /, b, *args, c, **kw): pass\n").body
    assert parameter_names(function.params) == ["a", "b", "args", "c", "kw"]


def test_the_static_check_and_the_codemods_see_the_same_bindings() -> None:
    module = cst.parse_module(SOURCE)
    static = Interpreter(module, SOURCE).module_scope.bindings
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    facts = SourceFacts.collect(wrapper.module, wrapper.resolve(PositionProvider)).module_scope.bindings
    seen_by_codemods = {name: [b.kind for b in found] for name, found in facts.items()}
    seen_statically = {name: [b.kind for b in found if b.kind != "annotation"] for name, found in static.items()}
    assert seen_by_codemods == {name: kinds for name, kinds in seen_statically.items() if kinds}


def test_the_static_check_reads_source_facts_without_the_codemods(tmp_path: Path) -> None:
    """Both sides share ``offload_fixer.source``; neither imports the other."""
    probe = (
        "import sys, offload_fixer.static.api, offload_fixer.static.interpreter, offload_fixer.static.policies; "
        "print(sorted(m for m in sys.modules if m.startswith(('offload_fixer.codemods', 'offload_fixer.fixes'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"
