"""What the codemods read of a module: names resolved through its imports, bindings with lines."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from offload_fixer.codemods.source_facts import SourceFacts


def facts_of(source: str) -> SourceFacts:
    wrapper = MetadataWrapper(cst.parse_module(textwrap.dedent(source)), unsafe_skip_copy=True)
    return SourceFacts.collect(wrapper.module, wrapper.resolve(PositionProvider))


def test_names_resolve_through_the_imports_of_any_scope() -> None:
    facts = facts_of("""\
        import jax as jx
        import jax.numpy as jnp
        from functools import partial as bind

        def f():
            from jax import device_put as put
            import jax
        """)
    qualify = facts.aliases.qualify
    assert qualify(cst.parse_expression("jx.jit")) == "jax.jit"
    assert qualify(cst.parse_expression("jnp.sum")) == "jax.numpy.sum"
    assert qualify(cst.parse_expression("bind")) == "functools.partial"
    assert qualify(cst.parse_expression("put")) == "jax.device_put"
    assert qualify(cst.parse_expression("jx.jit(f)")) is None
    # a fix writes only what the module binds when it runs: f's imports are f's alone
    assert facts.aliases.jax_module() == "jx"
    assert facts.aliases.imported_from_jax("device_put") is None
    assert facts.aliases.partial == ["bind"]


def test_imports_only_a_type_checker_sees_are_read_and_never_written() -> None:
    facts = facts_of("""        import typing
        from typing import TYPE_CHECKING
        from jax import device_put

        if TYPE_CHECKING:
            import jax
            from functools import partial
        if typing.TYPE_CHECKING:
            import jax.numpy as jnp
        else:
            import numpy as jnp
        """)
    assert facts.aliases.qualify(cst.parse_expression("jax.jit")) == "jax.jit"
    assert facts.aliases.jax_module() is None  # a fix adds `import jax`
    assert facts.aliases.partial == []
    assert facts.aliases.imported_from_jax("device_put") == "device_put"
    assert facts.aliases.locals_of("numpy") == ["jnp"]
    assert "jax" not in facts.module_scope.bindings


def test_a_module_imported_relatively_is_not_jax() -> None:
    facts = facts_of("""\
        from . import jax

        @jax.jit
        def f(x):
            return x
        """)
    (function,) = facts.functions
    assert facts.aliases.jax_module() is None
    assert facts.jit_sites(function) == []


def test_bindings_have_their_lines_and_annotations_bind_nothing_yet() -> None:
    facts = facts_of("""\
        import jax

        host: object
        if (host := jax.devices()):
            pass
        single = host

        @jax.jit
        def f(x):
            return x
        """)
    scope = facts.module_scope
    assert [facts.binding_line(b) for b in scope.bindings["host"]] == [4]
    assert facts.binding_line(scope.bindings["f"][0]) == 8  # the decorator, as co_firstlineno
    single = cst.parse_expression("single")
    assert not facts.visible(single, scope, 6) and facts.visible(single, scope, 7)
