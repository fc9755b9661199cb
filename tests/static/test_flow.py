"""How memory kinds flow: configuration branches, helper parameters, autodiff, pytree libraries."""

from __future__ import annotations

import pytest

from .helpers import LEGACY, PROPAGATION, TYPED, VERSIONS, diagnostics, found

# --------------------------------------------------------------------------- branches on a flag
FLAG_BRANCH = """
@partial(jax.jit, static_argnums=1)
def f(x, offload):
    y = x
    if offload:
        y = jax.device_put(x, host)
    return y * 2
"""


def test_host_on_one_branch_of_a_flag_is_a_finding_that_says_when():
    (d,) = diagnostics(FLAG_BRANCH)
    assert d.message.endswith("when `offload` is true (prog.py:17)")
    assert "reachable" in d.explanation and "configured" in d.explanation
    assert d.origin.kind == "move_to_host"


@pytest.mark.parametrize(
    "body, expected",
    [
        # the else branch, a negated test, a conditional expression, a sharding chosen by a flag
        (
            "def f(x, cfg):\n    if not cfg.offload:\n        y = x\n    else:\n"
            "        y = jax.device_put(x, host)\n    return y * 2\n",
            "`cfg.offload` is true",
        ),
        (
            "def f(x, cfg):\n    y = jax.device_put(x, host) if cfg.offload else x\n    return y + 1\n",
            "`cfg.offload` is true",
        ),
        (
            "def f(x, cfg):\n    s = dev if cfg.on_device else host\n    return jax.device_put(x, s) + 1\n",
            "`cfg.on_device` is false",
        ),
    ],
    ids=["else-branch", "if-expression", "sharding"],
)
def test_flag_spellings(body, expected):
    (d,) = diagnostics("@partial(jax.jit, static_argnums=1)\n" + body)
    assert expected in d.message


@pytest.mark.parametrize(
    "body",
    [
        # the same flag moves it back: correlated branches
        "def f(x, offload):\n    if offload:\n        x = jax.device_put(x, host)\n    if offload:\n"
        "        x = jax.device_put(x, dev)\n    return x * 2\n",
        "def f(x, offload):\n    if offload:\n        x = jax.device_put(x, host)\n    if not offload:\n"
        "        return x * 2\n    return jax.device_put(x, dev)\n",
        "def f(x, offload):\n    if offload:\n        x = jax.device_put(x, host)\n"
        "    return jax.device_put(x, dev) if offload else x\n",
        # another test after the branch: it may be correlated with the first
        "def f(x, offload, mode):\n    if offload:\n        x = jax.device_put(x, host)\n    if mode:\n"
        "        return x * 2\n    return jax.device_put(x, dev)\n",
        # a test on the value itself is not a flag
        "def f(x):\n    y = jax.device_put(x, host)\n    if y.sharding.memory_kind == 'pinned_host':\n"
        "        y = jax.device_put(y, dev)\n    return y * 2\n",
    ],
    ids=["same-flag", "negated-flag", "conditional-expression", "other-flag", "value-test"],
)
def test_correlated_branches_stay_silent(body):
    for version in VERSIONS:
        assert found("@partial(jax.jit, static_argnums=1)\n" + body, version) == [], version


def test_an_unrelated_branch_keeps_the_finding():
    body = """
    @partial(jax.jit, static_argnums=1)
    def f(x, offload, debug=False):
        if offload:
            x = jax.device_put(x, host)
        if debug:
            print("step")
        return x * 2
    """
    (d,) = diagnostics(body)
    assert "`offload` is true" in d.message


def test_a_constant_test_takes_one_branch():
    body = """
    OFFLOAD = {flag}

    @jax.jit
    def f(x):
        if OFFLOAD:
            x = jax.device_put(x, host)
        return x * 2
    """
    (d,) = diagnostics(body.replace("{flag}", "True"))
    assert "when" not in d.message
    assert diagnostics(body.replace("{flag}", "False")) == ()


# --------------------------------------------------------------------------- helpers and autodiff
def test_a_helper_called_with_a_known_sharding():
    body = """
    def offload(tree, sharding):
        return jax.device_put(tree, sharding.with_memory_kind("pinned_host"))

    @jax.jit
    def f(x):
        return offload(x, dev) * 2
    """
    assert found(body, PROPAGATION) == [("OFL1200", "")]


def test_value_and_grad_traces_the_loss_on_host_parameters():
    body = """
    def loss_fn(params, x):
        return jnp.mean((x @ params["w"]) ** 2)

    @partial(jax.jit, in_shardings=(host, dev), out_shardings=(host, None))
    def step(params, x):
        loss, grads = jax.value_and_grad(loss_fn)(params, x)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), loss
    """
    assert found(body, TYPED) == [("OFL1200", "[1]")]


def test_gradients_of_device_inputs_are_device_and_aux_is_traced():
    body = """
    def loss_fn(params, x):
        return jnp.sum(x * params), jax.device_put(x, host) * 2

    @jax.jit
    def step(params, x):
        (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, x)
        g = jax.grad(lambda p: jnp.sum(p * x), argnums=(0,))(params)
        return loss, grads, g, aux
    """
    assert found(body, PROPAGATION) == [("OFL1200", "[3]")]


def test_gradients_of_host_inputs_are_unknown():
    body = """
    @partial(jax.jit, in_shardings=(host,), out_shardings=host)
    def step(params):
        grads = jax.grad(lambda p: jnp.sum(p ** 2))(params)
        return grads
    """
    for version in VERSIONS:
        assert found(body, version) == [], version


def test_fields_and_keys_of_a_pytree_argument_keep_its_memory():
    body = """
    @partial(jax.jit, in_shardings=(host,), out_shardings=None)
    def step(state):
        return state.params["w"] * 2, state.opt_state
    """
    assert found(body, PROPAGATION) == [("OFL1200", "[0]")]
    assert found(body, LEGACY) == [("OFL1200", "[0]"), ("OFL1200", "[1]")]


# --------------------------------------------------------------------------- libraries and configs
OPTAX_STEP = """
import optax

tx = {optimizer}

@partial(jax.jit, in_shardings=(dev, host, dev), out_shardings=(None, host))
def step(params, opt_state, grads):
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state
"""


@pytest.mark.parametrize(
    "optimizer, expected",
    [
        ("optax.adam(1e-3)", [("OFL1200", "[0]")]),
        ("optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))", [("OFL1200", "[0]")]),
        ("optax.sgd(0.1, momentum=0.9)", [("OFL1200", "[0]")]),
        ("optax.sgd(0.1)", []),  # no moments: the update reads only the gradients
        ("make_optimizer()", []),  # unknown: the check cannot tell what the update reads
    ],
)
def test_optax_updates_read_the_optimizer_state(optimizer, expected):
    assert found(OPTAX_STEP.replace("{optimizer}", optimizer), PROPAGATION) == expected


def test_nnx_split_and_merge_keep_the_memory_of_the_state():
    body = """
    from flax import nnx

    @partial(jax.jit, in_shardings=(host,), out_shardings=None)
    def step(state):
        model = nnx.merge(graphdef, state)
        _, new_state = nnx.split(model)
        return jax.tree.map(lambda x: x * 2, nnx.state(model)), new_state
    """
    assert found(body, TYPED) == [("OFL1200", "[0]"), ("OFL1200", "[1]")]
    assert found(body, PROPAGATION) == [("OFL1200", "[0]")]  # [1] is returned unchanged


def test_a_dataclass_configuration_gives_its_defaults():
    body = """
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Config:
        offload: bool = True
        scale: float = dataclasses.field(default=2.0)

    def placement(config):
        if config.offload:
            return host
        return dev

    @jax.jit
    def on(x):
        return jax.device_put(x, placement(Config())) * 2

    @jax.jit
    def off(x):
        return jax.device_put(x, placement(dataclasses.replace(Config(), offload=False))) * 2
    """
    (d,) = diagnostics(body)
    assert d.function.name == "on" and "when" not in d.message


def test_python_loops_over_layers_and_scan_slices_keep_host_memory():
    body = """
    @partial(jax.jit, in_shardings=(host, dev), out_shardings=(host, None, None))
    def step(params, x):
        h = params["bias"] * 1.0
        for layer in params["layers"]:  # each layer is host memory too
            h = jnp.tanh(h @ layer["w"])
        ys = lax.scan(lambda c, w: (c, w * 2), x, params["stacked"])[1]
        return params, h, ys
    """
    assert found(body, PROPAGATION) == [("OFL1200", "[1]"), ("OFL1200", "[2]")]


def test_host_data_mixed_with_a_value_moved_to_device_is_undecided():
    body = """
    @partial(jax.jit, in_shardings=(host, dev), out_shardings=(host, None))
    def step(params, x):
        w = jax.device_put(params["w"], dev)
        return params, jnp.sum(jnp.tanh(x @ w) @ params["head"])
    """
    for version in VERSIONS:
        assert found(body, version) == [], version
