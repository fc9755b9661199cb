"""How a source check tells the returned host state from a new value (issue 22, item 2): the
state is kept host memory, a new value stays device memory, and anything else is left to `run`."""

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from offload_fixer.codemods.pytree_source import returned_values
from offload_fixer.codemods.source_facts import SourceFacts
from offload_fixer.codemods.state_flow import StateFlow

HEADER = "import jax\nimport jax.numpy as jnp\nfrom jax import lax\n\nLR = 0.1\n\n\n"


def flow_of(body: str, parameter: str = "w", leaves=((),)) -> tuple[str, tuple]:
    wrapper = MetadataWrapper(cst.parse_module(HEADER + body))
    facts = SourceFacts.collect(wrapper.module, wrapper.resolve(PositionProvider))
    function = next(f for f in facts.functions if f.name == "f")
    ((_, value),) = returned_values(function, ())
    found = StateFlow(facts, parameter, [tuple(leaf) for leaf in leaves]).at(function.scope, value)
    return found.kind, found.path


@pytest.mark.parametrize(
    "body",
    [
        "def f(w, g):\n    return w\n",
        "def f(w, g):\n    return w * 0.5 - LR\n",
        "def f(w, g):\n    w = w - LR * g\n    return w\n",  # the name rebound from itself
        "def f(w, g):\n    return lax.while_loop(lambda c: c[0] < 3, lambda c: c, (0, w))[1]\n",
        "def f(w, n):\n    return lax.fori_loop(0, n, lambda i, a: a + 1.0, w)\n",
        "def f(w, p):\n    return lax.cond(p, lambda w: w, lambda w: w * 2.0, w)\n",
        "def f(w, keep):\n    return lax.select(keep, w, jnp.zeros_like(w))\n",
        "def f(w, i, v):\n    return w.at[i].set(v)\n",
        "def f(w):\n    return jnp.log1p(jnp.exp(w))\n",
        "def f(w, g):\n    return jax.tree.map(lambda p, d: p - LR * d, w, g)\n",
    ],
)
def test_the_state_is_told_apart(body: str) -> None:
    assert flow_of(body) == ("state", ())


@pytest.mark.parametrize(
    "body",
    [
        "def f(w, x):\n    return jnp.mean(x @ w)\n",
        "def f(w, x):\n    return jnp.tanh(x @ w)\n",
        "def f(w, i):\n    return w[i] * 2.0\n",
        "def f(w, s):\n    return lax.dynamic_slice(w, (s, 0), (4, 8))\n",
        "def f(w, x):\n    def body(h, layer):\n        return jnp.tanh(h @ layer), None\n    return lax.scan(body, x, w)[0]\n",
        "def f(w, x):\n    for layer in w:\n        x = jax.nn.relu(x @ layer)\n    return x\n",
    ],
)
def test_a_new_value_is_told_apart(body: str) -> None:
    assert flow_of(body)[0] == "new"


@pytest.mark.parametrize(
    "body",
    [
        "def f(w, x):\n    return jax.nn.relu(x + w)\n",  # x may broadcast past w
        "def f(w, g):\n    return w - 0.1 * g\n",
        "def f(w, x):\n    return jnp.where(x > 0, w, x)\n",
    ],
)
def test_an_update_with_an_operand_of_unknown_shape_is_only_derived(body: str) -> None:
    assert flow_of(body) == ("derived", ())


@pytest.mark.parametrize(
    "body",
    [
        "def f(w):\n    return w.astype(jnp.bfloat16)\n",  # the same dtype or not: no types
        "def f(w, x):\n    return helper(w, x)\n",
        "def f(w, x):\n    return lax.fori_loop(0, 4, lambda i, a: a + w, x)\n",
    ],
)
def test_what_the_source_does_not_show_is_unknown(body: str) -> None:
    assert flow_of(body)[0] in ("unknown", "derived")
    assert flow_of(body)[0] != "state"


def test_a_sub_tree_of_the_state_keeps_its_path() -> None:
    body = (
        "def f(state, grads):\n"
        "    opt = state['opt']\n"
        "    mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, opt['mu'], grads)\n"
        "    return mu\n"
    )
    leaves = [(("key", "opt"), ("key", "mu"), ("key", "w")), (("key", "opt"), ("key", "mu"), ("key", "b"))]
    assert flow_of(body, "state", leaves) == ("state", (("key", "opt"), ("key", "mu")))
