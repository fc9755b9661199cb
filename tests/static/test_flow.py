"""How memory kinds flow: configuration branches, helper parameters, autodiff, pytree libraries."""

from __future__ import annotations

import pytest

from offload_fixer.static import check_source

from .helpers import LEGACY, PROPAGATION, TYPED, VERSIONS, diagnostics, found, host_compute, program

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


# ---------------------------------------------------------------------------------------
# Memory kinds through helpers, loops, custom derivatives, containers (issue 25's programs,
# each checked against ``run`` in tests/static_vs_dynamic/)
@pytest.mark.parametrize(
    "body, expected",
    [
        # a helper returning a tuple: ``grads, _ = helper(params)``
        (
            """
            def helper(p):
                return jax.tree.map(jnp.ones_like, p), 0.0

            def step(params, nu):
                grads, _ = helper(params)
                nu = jax.tree.map(lambda v, g: 0.9 * v + g, nu, grads)
                return jax.tree.map(lambda p, v: p - 0.01 * v, params, nu)

            train = jax.jit(step, in_shardings=(dev, host))
            """,
            [("OFL1200", "")],
        ),
        # loop carries: fori_loop adding a host bias, a while_loop and a scan started from host
        (
            "f = jax.jit(lambda b, x: lax.fori_loop(0, 4, lambda i, acc: acc + b, x), in_shardings=(host, dev))",
            [("OFL1200", "")],
        ),
        (
            """
            def iterate(state):
                return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 0.5), (0, state))[1]

            run = jax.jit(iterate, in_shardings=host)
            """,
            [("OFL1200", "")],
        ),
        (
            """
            def forward(stack, x):
                def body(h, i):
                    w = lax.dynamic_index_in_dim(stack, i, keepdims=False)
                    return jnp.tanh(h @ w), None

                return lax.scan(body, x, jnp.arange(4))[0]

            run = jax.jit(forward, in_shardings=(host, dev))
            """,
            [("OFL1200", "")],
        ),
        # the streaming idiom: each layer moved to device in the body
        (
            """
            def forward(stack, x):
                def body(h, i):
                    w = jax.device_put(lax.dynamic_index_in_dim(stack, i, keepdims=False), dev)
                    return jnp.tanh(h @ w), None

                return lax.scan(body, x, jnp.arange(4))[0]

            run = jax.jit(forward, in_shardings=(host, dev))
            """,
            [],
        ),
        # a Python loop over the layers runs at least once
        (
            """
            def forward(layers, x):
                for w in layers:
                    x = jax.nn.relu(x @ w)
                return x

            run = jax.jit(forward, in_shardings=(host, dev))
            """,
            [("OFL1200", "")],
        ),
        # custom_vjp, a custom_jvp function jitted itself, a checkpointed block on host weights
        (
            """
            @jax.custom_vjp
            def scale(w, x):
                return w * x

            scale.defvjp(lambda w, x: (w * x, (w, x)), lambda res, g: (g * res[1], g * res[0]))
            run = jax.jit(lambda w, x: scale(w, x), in_shardings=(host, dev))
            """,
            [("OFL1200", "")],
        ),
        (
            """
            @jax.custom_jvp
            def softplus(x):
                return jnp.log1p(jnp.exp(x))

            run = jax.jit(softplus, in_shardings=host)
            """,
            [("OFL1200", "")],
        ),
        (
            "run = jax.jit(lambda w, x: jax.checkpoint(lambda w, x: jnp.tanh(x @ w))(w, x), in_shardings=(host, dev))",
            [("OFL1200", "")],
        ),
        # where/select mixing host and device
        ("run = jax.jit(lambda h, x: jnp.where(x > 0, h, x), in_shardings=(host, dev))", [("OFL1200", "")]),
        (
            "run = jax.jit(lambda h, k: lax.select(k, h, jnp.zeros_like(h)), in_shardings=(host, dev))",
            [("OFL1200", "")],
        ),
        # gradients with respect to host params are computed on host
        (
            """
            def grads(params, x):
                return jax.grad(lambda p: jnp.mean((x @ p["w"] + p["b"]) ** 2))(params)

            run = jax.jit(grads, in_shardings=(host, dev))
            """,
            [("OFL1200", "")],
        ),
        # a jit of a jitted function: the outer jit's in_shardings
        ("inner = jax.jit(lambda p: p * 2)\nrun = jax.jit(inner, in_shardings=host)", [("OFL1200", "")]),
        # a slice of a host parameter returned is a DMA to device; computed on, it is host compute
        ("run = jax.jit(lambda h: h[0:4], in_shardings=host)", []),
        ("run = jax.jit(lambda h: h[0:4] * 2, in_shardings=host)", [("OFL1200", "")]),
    ],
)
def test_memory_kinds_flow_through_what_jax_code_does(body, expected):
    assert found(body, TYPED) == expected


def test_registered_dataclass_and_named_tuple_state_keep_their_fields():
    body = """
    import dataclasses
    from typing import NamedTuple


    @jax.tree_util.register_dataclass
    @dataclasses.dataclass
    class State:
        params: jax.Array
        moment: jax.Array


    class Momentum(NamedTuple):
        velocity: jax.Array
        count: jax.Array


    def update(state, grad):
        moment = 0.9 * state.moment + grad
        return State(params=state.params - 0.1 * moment, moment=moment)


    def momentum(state, grad):
        return Momentum(0.9 * state.velocity + grad, state.count + 1)


    run = jax.jit(update, in_shardings=(State(dev, host), dev))
    run_momentum = jax.jit(momentum, in_shardings=(Momentum(host, dev), dev))
    """
    assert found(body, TYPED) == [("OFL1200", ".moment"), ("OFL1200", ".params"), ("OFL1200", ".velocity")]


def test_host_compute_is_reported_as_run_reports_it():
    """Adam on host moments declared host: XLA compiles it, and computes the update on the
    host CPU (OFL1201, ``run``'s warning). A host value computed on that also reaches a device
    output has both findings, as ``run`` reports them: the output's error and the host compute."""
    body = """
    def step(params, mu, grads):
        mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, mu, grads)
        params = jax.tree.map(lambda p, m: p - 0.01 * m, params, mu)
        return params, mu, jnp.sum(grads)


    run = jax.jit(step, in_shardings=(dev, host, dev), out_shardings=(dev, host, dev))
    """
    assert found(body, TYPED) == []
    assert host_compute(body) == [(3, "multiply")]
    returned = "run = jax.jit(lambda h: h * 2, in_shardings=host)"
    assert found(returned, TYPED) == [("OFL1200", "")] and host_compute(returned) == [(1, "multiply")]
    moved_first = "run = jax.jit(lambda h: jax.device_put(h, dev) * 2, in_shardings=host, out_shardings=dev)"
    assert host_compute(moved_first) == []
    streamed_update = "run = jax.jit(lambda c, e: c.at[0].set(e), in_shardings=(host, dev), out_shardings=host)"
    assert host_compute(streamed_update) == []  # a dynamic-update-slice into the host buffer


def test_a_scatter_at_an_array_index_is_host_compute():
    """``c.at[i].set(e)`` at a constant index is a dynamic-update-slice (a memory transfer); at
    an index that is an array it stays a scatter, which XLA runs on the host. A Python loop's
    counter is a constant to JAX."""
    traced = "run = jax.jit(lambda c, e, i: c.at[i].set(e), in_shardings=(host, dev, dev), out_shardings=host)"
    assert host_compute(traced) == [(1, "scatter")]
    unrolled = """
    def fill(c, e):
        for i in range(3):
            c = c.at[i].set(e)
        return c


    run = jax.jit(fill, in_shardings=(host, dev), out_shardings=host)
    """
    assert host_compute(unrolled) == []


def _host_compute_diagnostics(body: str) -> list:
    result = check_source(program(body), "prog.py", target="tpu", jax_version=TYPED)
    return [d for d in result.diagnostics if d.code == "OFL1201"]


def test_host_compute_on_a_configuration_branch_says_when():
    body = """
    import sys
    OFFLOAD = "--offload" in sys.argv
    MOMENTS = host if OFFLOAD else dev


    run = jax.jit(lambda m, g: 0.9 * m + g, in_shardings=(MOMENTS, dev), out_shardings=MOMENTS)
    """
    (warning,) = _host_compute_diagnostics(body)
    assert warning.explanation.startswith("The value is host memory only on the branch taken when `OFFLOAD` is true")


FACTORY_BODIES = {
    "lambda factory": """
        def jit_with(**options):
            return lambda fn: jax.jit(fn, **options)

        @jit_with(in_shardings=(dev, host))
        def step(params, nu):
            return params - 0.1 * (0.9 * nu + 1.0)
        """,
    "def factory, dict and keywords": """
        OPTIONS = {"in_shardings": (dev, host)}

        def compiled(**extra):
            def wrap(fn):
                return jax.jit(fn, **OPTIONS, **extra)
            return wrap

        @compiled(donate_argnums=(0,))
        def step(params, nu):
            return params - 0.1 * (0.9 * nu + 1.0)
        """,
    "partial of jit over a dict": """
        STREAMED = dict(in_shardings=(dev, host))
        jit_streamed = functools.partial(jax.jit, **STREAMED)

        @jit_streamed
        def step(params, nu):
            return params - 0.1 * (0.9 * nu + 1.0)
        """,
    "jit(**options) then called": """
        OPTIONS = {"in_shardings": (dev, host)}

        def step(params, nu):
            return params - 0.1 * (0.9 * nu + 1.0)

        train = jax.jit(**OPTIONS)(step)
        """,
}


@pytest.mark.parametrize("body", FACTORY_BODIES.values(), ids=FACTORY_BODIES)
def test_jit_options_unpacked_from_a_decorator_factory_are_read(body):
    assert found(body, TYPED) == [("OFL1200", "")]
    line = "            return params - 0.1"
    moved = body.replace(line, "            nu = jax.device_put(nu, dev)\n" + line)
    assert found(moved, TYPED) == []


def test_options_an_unpacked_mapping_cannot_spell_stay_unknown():
    body = """
        def jit_with(options):
            return lambda fn: jax.jit(fn, **options)

        @jit_with(CONFIG.jit_options)
        def step(params, nu):
            return params - 0.1 * (0.9 * nu + 1.0)
        """
    assert found(body, TYPED) == []
