"""Name resolution without whole-file scope analysis: which binding a name has where."""

from __future__ import annotations

import libcst as cst

from offload_fixer.static.interpreter import Interpreter
from offload_fixer.static.values import UNKNOWN, Function, Ref, ShardingSpec

from .helpers import LEGACY, found


def _module_scope(source: str):
    module = cst.parse_module(source)
    return Interpreter(module, source).module_scope


def test_imports_resolve_to_canonical_names():
    scope = _module_scope(
        "import jax\nimport jax.numpy as jnp\nfrom jax import lax as L\nfrom jax.sharding import NamedSharding as NS\n"
        "import jax.experimental.pjit\nfrom .local import thing\n"
    )
    assert scope.lookup("jax") == Ref("jax")
    assert scope.lookup("jnp") == Ref("jax.numpy")
    assert scope.lookup("L") == Ref("jax.lax")
    assert scope.lookup("NS") == Ref("jax.sharding.NamedSharding")
    assert scope.lookup("thing") is UNKNOWN  # relative: another file of the project
    assert scope.lookup("len") == Ref("builtins.len")
    assert scope.lookup("undefined_name") is UNKNOWN


def test_straight_line_rebinding_is_read_at_each_statement():
    source = (
        "from jax.sharding import NamedSharding\n"
        "s = NamedSharding(m, p, memory_kind='pinned_host')\n"
        "t = s\n"
        "s = NamedSharding(m, p, memory_kind='device')\n"
    )
    scope = _module_scope(source)
    assert scope.lookup("t") == ShardingSpec("pinned_host", placement="mesh")
    assert scope.lookup("s") == ShardingSpec("device", placement="mesh")  # what a function body sees later


def test_names_bound_in_branches_or_declared_global_are_unknown():
    source = (
        "import jax\n"
        "if flag:\n    s = 1\nelse:\n    s = 2\n"
        "g = jax\n"
        "def mutate():\n    global g\n    g = None\n"
        "def f():\n    pass\n"
    )
    scope = _module_scope(source)
    assert scope.lookup("s") is UNKNOWN
    assert scope.lookup("g") is UNKNOWN
    assert isinstance(scope.lookup("f"), Function)


def test_a_global_rebound_elsewhere_silences_the_check():
    body = """
    target = host

    def switch():
        global target
        target = dev

    @jax.jit
    def f(x):
        return jax.device_put(x, target)
    """
    assert found(body, LEGACY) == []
    assert found(body.replace("global target", "pass"), LEGACY) == [("OFL1200", "")]
