"""Spellings of jit sites and moves to host, and how values are followed to the return.

Most cases use JAX 0.4.26, where any host value returned through an undeclared output is an
error, so a finding shows the check followed the value; 0.6.2 is used where the path must
also be told apart from a plain ``device_put``.
"""

from __future__ import annotations

import pytest

from offload_fixer.static import check_source

from .helpers import LEGACY, PROPAGATION, TYPED, VERSIONS, flow, found, program


def error(path: str = "", code: str = "OFL1200") -> list:
    return [(code, path)]


# --------------------------------------------------------------------------- jit sites
@pytest.mark.parametrize(
    "definition",
    [
        "@jax.jit\ndef f(x):\n    return jax.device_put(x, host)\n",
        "@partial(jax.jit, static_argnums=1)\ndef f(x, n):\n    return jax.device_put(x, host)\n",
        "@functools.partial(jax.jit, donate_argnums=0)\ndef f(x):\n    return jax.device_put(x, host)\n",
        "def f(x):\n    return jax.device_put(x, host)\nf_jit = jax.jit(f, donate_argnums=0)\n",
        "def f(x):\n    return jax.device_put(x, host)\ny = jax.jit(f)(1.0)\n",
        "f = jax.jit(lambda x: jax.device_put(x, host))\n",
        "def f(x):\n    return jax.device_put(x, host)\nf = jax.jit(f)\n",
        "my_jit = partial(jax.jit, static_argnames='n')\n@my_jit\ndef f(x, n=1):\n    return jax.device_put(x, host)\n",
        "from jax.experimental.pjit import pjit\n@pjit\ndef f(x):\n    return jax.device_put(x, host)\n",
        "class Model:\n    @partial(jax.jit, static_argnums=0)\n    def f(self, x):\n"
        "        return jax.device_put(x, host)\n",
        "class Model:\n    @staticmethod\n    @jax.jit\n    def f(x):\n        return jax.device_put(x, host)\n",
        "def main():\n    def f(x):\n        return jax.device_put(x, host)\n    step = jax.jit(f)\n    return step\n",
        "if __name__ == '__main__':\n    def f(x):\n        return jax.device_put(x, host)\n"
        "    print(jax.jit(f)(1.0))\n",
    ],
    ids=[
        "decorator",
        "partial",
        "functools-partial",
        "assigned",
        "inline-call",
        "lambda",
        "rebound",
        "named-partial",
        "pjit",
        "method",
        "staticmethod",
        "inside-function",
        "main-block",
    ],
)
def test_jit_sites(definition):
    assert found(definition, LEGACY) == error()


def test_plain_functions_are_not_jit_sites():
    body = """
    def f(x):
        return jax.device_put(x, host)

    @some_decorator
    @jax.jit
    def g(x):
        return jax.device_put(x, host)
    """
    assert found(body, LEGACY) == []


# --------------------------------------------------------------------------- moves to host
@pytest.mark.parametrize(
    "setup, move",
    [
        ("", 'jax.device_put(x, NamedSharding(mesh, P(), memory_kind="pinned_host"))'),
        ("", 'jax.device_put(x, SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host"))'),
        ("", 'jax.device_put(x, dev.with_memory_kind("pinned_host"))'),
        ("", 'jax.device_put(x, x.sharding.with_memory_kind("pinned_host"))'),
        ("", 'jax.device_put(x, jax.typeof(x).sharding.with_memory_kind("pinned_host"))'),
        (
            "from jax._src.sharding_impls import TransferToMemoryKind\n",
            'jax.device_put(x, TransferToMemoryKind("pinned_host"))',
        ),
        ("", "jax.device_put(x, jax.memory.Space.Host)"),
        ("from jax.memory import Space\n", "jax.device_put(x, Space.Host)"),
        ("from jax import memory as mem\n", "jax.device_put(x, mem.Space.Host)"),
        ('KIND = "pinned_host"\nHOST2 = NamedSharding(mesh, P(), memory_kind=KIND)\n', "jax.device_put(x, HOST2)"),
        ("", "jax.device_put(x, device=host)"),
    ],
    ids=[
        "named",
        "single-device",
        "with-memory-kind",
        "x-sharding",
        "typeof",
        "transfer",
        "space",
        "space-import",
        "memory-alias",
        "kind-variable",
        "device-keyword",
    ],
)
def test_spellings_of_a_move_to_host(setup, move):
    body = f"{setup}@jax.jit\ndef f(x):\n    return {move}\n"
    assert found(body, LEGACY) == error()


def test_aliases_and_from_imports():
    body = """
    import jax as J
    import jax.numpy as np_
    from jax import device_put as put, jit as compile_it, lax as L
    from jax.sharding import NamedSharding as NS
    import functools as ft

    H = NS(mesh, P(), memory_kind="pinned_host")

    @ft.partial(compile_it, static_argnums=())
    def f(x):
        h = put(x, H)
        return np_.tanh(L.exp(h))

    g = J.jit(lambda x: np_.sum(J.device_put(x, H), axis=0))
    """
    assert found(body, PROPAGATION) == error() + error()


def test_shardings_bound_in_the_function_or_an_enclosing_one():
    body = """
    def make_step(mesh):
        offload = NamedSharding(mesh, P(), memory_kind="pinned_host")

        @jax.jit
        def step(x):
            s = offload.with_memory_kind("pinned_host")
            y = jax.device_put(x, s)
            return y + 1, jax.device_put(x, offload) * 2

        return step
    """
    assert found(body, PROPAGATION) == error("[0]") + error("[1]")


# --------------------------------------------------------------------------- following values
def test_assignments_unpacking_and_pytree_literals():
    body = """
    @jax.jit
    def f(x, y):
        a, b = jax.device_put((x, y), host)
        pair = [a, b]
        first, *rest = pair
        state = {"w": first}
        state["m"] = rest[0] * 2
        t = (state,) + (y,)
        return t
    """
    assert found(body, LEGACY) == error("[0]['m']") + error("[0]['w']")
    assert found(body, PROPAGATION) == error("[0]['m']")


def test_helpers_lambdas_and_loops_are_followed():
    body = """
    def scale(v, factor=2.0):
        return v * factor

    @jax.jit
    def f(x):
        h = jax.device_put(x, host)
        for _ in range(3):
            x = x + 1
        out = scale(h)
        sq = (lambda v: v ** 2)(out)
        return sq
    """
    assert found(body, PROPAGATION) == error()


def test_python_iteration_over_layers_is_followed():
    """``zip``/``enumerate`` loops, comprehensions, ``sum`` and ``jax.tree.leaves`` run at
    trace time: each item is traced, and a loop over a pytree of layers runs at least once."""
    body = """
    @jax.jit
    def f(ws, bs, x):
        ws = jax.device_put(ws, host)
        for i, (w, b) in enumerate(zip(ws, bs)):
            x = jnp.tanh(x @ w + b) * (i + 1)
        return x
    """
    assert found(body, LEGACY) == error()
    body = """
    @jax.jit
    def f(x):
        hs = [jax.device_put(v, host) * 2 for v in x]
        return hs, {k: v for k, v in {"a": x, "b": hs[0]}.items()}
    """
    assert found(body, LEGACY) == error("[0]") + error("[1]['b']")
    body = """
    @jax.jit
    def f(params):
        params = jax.device_put(params, host)
        return sum(jnp.sum(g**2) for g in jax.tree.leaves(params)), [len(params) for _ in range(2)]
    """
    assert found(body, LEGACY) == error("[0]")


def test_classes_of_the_project_are_followed():
    """Methods, properties and ``replace`` of dataclasses; a plain class built by ``__init__``
    and called through ``__call__``; an object a method changes is forgotten, not stale."""
    body = """
    import dataclasses

    @dataclasses.dataclass
    class State:
        w: jax.Array
        m: jax.Array

        @property
        def both(self):
            return self.w + self.m

        def replace(self, **changes):
            return dataclasses.replace(self, **changes)

    class Model:
        def __init__(self, scale):
            self.scale = scale

        def __call__(self, x):
            return jax.device_put(x, host) * self.scale

    @jax.jit
    def f(x):
        s = State(x, jax.device_put(x, host))
        return s.both, s.replace(w=s.m), Model(2.0)(x)
    """
    assert found(body, LEGACY) == error("[0]") + error("[1].m") + error("[1].w") + error("[2]")
    body = """
    class Stash:
        def __init__(self, w):
            self.w = jax.device_put(w, host)

        def load(self):
            self.w = jax.device_put(self.w, dev)

    @jax.jit
    def f(x):
        stash = Stash(x)
        stash.load()
        return stash.w * 2
    """
    assert found(body, LEGACY) == []


def test_jit_of_a_transformed_function_traces_it():
    body = """
    def loss(w, x):
        w = jax.device_put(w, host)
        return jnp.sum(x @ w)

    step = jax.jit(jax.value_and_grad(loss))
    """
    # the loss is computed on host; the gradient comes back through the move's transpose
    assert found(body, LEGACY) == error("[0]")


def test_tree_map_moves_every_leaf():
    body = """
    @jax.jit
    def f(params, x):
        offloaded = jax.tree.map(lambda v: jax.device_put(v, host), params)
        pair = jax.tree_util.tree_map(lambda v: jax.device_put(v, host) * 2, {"a": x, "b": (x, None)})
        return offloaded, pair
    """
    assert found(body, LEGACY) == error("[0]") + error("[1]['a']") + error("[1]['b'][0]")
    assert found(body, PROPAGATION) == error("[1]['a']") + error("[1]['b'][0]")


def test_scan_body_written_as_local_function():
    body = """
    @jax.jit
    def f(xs):
        def body(carry, x):
            y = jax.device_put(x, host)
            return carry + 1, jnp.tanh(y)
        final, ys = lax.scan(body, 0.0, xs)
        return final, ys
    """
    assert found(body, PROPAGATION) == error("[1]")


def test_conditional_python_branches_each_return():
    body = """
    @partial(jax.jit, static_argnums=1)
    def f(x, flag):
        if flag:
            return jax.device_put(x, host) * 2
        else:
            return x
    """
    assert found(body, PROPAGATION) == error()


def test_output_index_follows_jax_flattening_order():
    source = program("""
    @jax.jit
    def f(x):
        return x, {"z": x, "a": jax.device_put(x, host)}
    """)
    (diagnostic,) = flow(check_source(source, "p.py", jax_version=LEGACY))
    assert diagnostic.output_path == "[1]['a']"
    assert diagnostic.output_index is None  # ``x`` is an argument of unknown structure

    source = program("""
    @jax.jit
    def f(x):
        return x * 1, {"z": x * 1, "a": jax.device_put(x * 1, host)}
    """)
    (diagnostic,) = flow(check_source(source, "p.py", jax_version=LEGACY))
    assert diagnostic.output_index == 1  # dict keys flatten sorted: 'a' before 'z'


# --------------------------------------------------------------------------- silence
@pytest.mark.parametrize(
    "body",
    [
        # moved back to device in every spelling
        "@jax.jit\ndef f(x):\n    h = jax.device_put(x, host)\n    return jax.device_put(h * 2, dev)\n",
        "@jax.jit\ndef f(x):\n    h = jax.device_put(x, host)\n    return jax.device_put(h, jax.memory.Space.Device)\n",
        "@jax.jit\ndef f(x):\n    h = jax.device_put(x, host)\n"
        "    return jax.device_put(h, h.sharding.with_memory_kind('device'))\n",
        "from jax._src.sharding_impls import TransferToMemoryKind as T\n"
        "@jax.jit\ndef f(x):\n    return jax.device_put(jax.device_put(x, host), T('device'))\n",
        # host value consumed, not returned
        "@jax.jit\ndef f(x):\n    h = jax.device_put(x, host)\n    return jnp.zeros_like(h) + x.shape[0]\n",
        # flows through something the check does not model
        "import helpers\n@jax.jit\ndef f(x):\n    return helpers.transform(jax.device_put(x, host))\n",
        "@jax.jit\ndef f(x, s):\n    return jax.device_put(x, s)\n",
        "@jax.jit\ndef f(x):\n    return jax.device_put(x, NamedSharding(mesh, P(), memory_kind=x.kind))\n",
        "@jax.jit\ndef f(x):\n    h = jax.device_put(x, host)\n"
        "    return jax.device_put(h, NamedSharding(mesh, P()))\n",
        "@jax.jit\ndef f(x):\n    return jax.checkpoint(lambda v: jax.device_put(v, host) * 2)(x)\n",
        # a name that may hold different things
        "if cond:\n    target = host\nelse:\n    target = dev\n"
        "@jax.jit\ndef f(x):\n    return jax.device_put(x, target) * 2\n",
        "@partial(jax.jit, static_argnums=1)\ndef f(x, flag):\n    y = x\n    if flag:\n"
        "        y = jax.device_put(x, host)\n    if flag:\n        y = jax.device_put(y, dev)\n    return y * 2\n",
        # local names that shadow the JAX modules
        "@jax.jit\ndef f(x, jax):\n    return jax.device_put(x, host) * 2\n",
        "@jax.jit\ndef f(x):\n    jnp = other_module\n    return jnp.sin(jax.device_put(x, host))\n",
        # out_shardings the check cannot read
        "def build(out):\n    @partial(jax.jit, out_shardings=out)\n    def f(x):\n"
        "        return jax.device_put(x, host) * 2\n    return f\n",
        # a dict changed by a helper the caller passes it to
        "def reset(d):\n    d['a'] = jax.device_put(d['a'], dev)\n"
        "@jax.jit\ndef f(x):\n    d = {'a': jax.device_put(x, host) * 2}\n    reset(d)\n    return d\n",
        # not jitted
        "def f(x):\n    return jax.device_put(x, host) * 2\n",
    ],
    ids=[
        "device-sharding",
        "space-device",
        "with-memory-kind-device",
        "transfer-device",
        "zeros-like",
        "unknown-function",
        "unknown-sharding",
        "unknown-kind",
        "sharding-without-kind",
        "checkpoint",
        "conditional-global",
        "correlated-branches",
        "param-named-jax",
        "shadowed-jnp",
        "unknown-out-shardings",
        "mutated-by-helper",
        "not-jitted",
    ],
)
def test_stays_silent(body):
    for version in VERSIONS:
        assert found(body, version) == [], version


def test_programs_without_any_host_memory_produce_nothing():
    body = """
    import optax

    @jax.jit
    def train_step(params, opt_state, batch):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((batch @ p) ** 2))(params)
        updates, opt_state = optax.adam(1e-3).update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss
    """
    for version in VERSIONS:
        assert found(body, version) == []


def test_typed_regime_host_argument_gap_is_reported_by_default_version():
    source = program("""
    @partial(jax.jit, in_shardings=host)
    def f(x):
        return x * 2
    """)
    assert [d.code for d in flow(check_source(source, "p.py"))] == ["OFL1200"]
    assert found("@partial(jax.jit, in_shardings=host)\ndef f(x):\n    return x * 2\n", TYPED) == error()


def test_cond_with_one_device_branch():
    body = """
    @jax.jit
    def f(p, x):
        return lax.cond(p, lambda v: jax.device_put(v, host), lambda v: v * 1.0, x)
    """
    # <=0.7.0: the host branch reaches the output; >=0.7.1 rejects mixed spaces at trace time.
    assert [found(body, v) for v in VERSIONS] == [error(), error(), []]


def test_switch_and_device_loop_carries():
    body = """
    @jax.jit
    def f(i, x):
        y = lax.switch(i, [lambda v: jax.device_put(v, host) + 1, lambda v: jax.device_put(v, host) - 1], x)
        c = lax.fori_loop(0, 3, lambda k, c: c * 2, x)
        return y, c
    """
    assert found(body, PROPAGATION) == error("[0]")


def test_in_shardings_per_argument_and_per_leaf():
    body = """
    @partial(jax.jit, static_argnames="cfg", in_shardings=({"w": host, "b": None}, None))
    def f(params, x, cfg=None):
        return params["w"] * x, params["b"] * x, x
    """
    (d,) = [(c, p) for c, p in found(body, PROPAGATION)]
    assert d == ("OFL1200", "[0]")


def test_in_shardings_cover_the_arguments_passed_not_defaults():
    body = """
    @partial(jax.jit, in_shardings=host)
    def f(x, scale=2.0):
        return x * 2, scale * 2

    @partial(jax.jit, in_shardings=(None,))
    def g(x, y=None):
        return x, jax.device_put(y, host) * 2
    """
    assert found(body, PROPAGATION) == error("[0]") + error("[1]")


def test_partial_application_before_jit():
    body = """
    def loss(scale, x):
        return jax.device_put(x, host) * scale
    step = jax.jit(partial(loss, 2.0), in_shardings=(host,))
    """
    assert found(body, PROPAGATION) == error()


def test_dict_get_walrus_and_augmented_assignment():
    body = """
    @jax.jit
    def f(x):
        state = {"m": jax.device_put(x, host)}
        m = state.get("m")
        if (n := m * 2) is not None:
            n += 1
        return n
    """
    assert found(body, PROPAGATION) == error()


def test_diagnostics_for_gpu_are_errors_like_tpu():
    """Every released XLA:GPU rejects error 1200 like libtpu (the main branch's silent switch of
    the output to host memory is in no released compiler)."""
    source = program("@jax.jit\ndef f(x):\n    return jax.device_put(x, host) * 2\n")
    (d,) = flow(check_source(source, "p.py", target="gpu", jax_version=PROPAGATION))
    assert d.severity == "error"


def test_a_helper_that_always_raises_is_unknown_not_a_crash():
    """Found in maxtext (``experimental/rl/grpo_utils.py``): a helper whose every path raises
    returns nothing, so its call is unknown and the check stays silent."""
    source = (
        "import jax\n"
        "from jax.sharding import NamedSharding, PartitionSpec as P\n"
        'HOST = NamedSharding(jax.make_mesh((1,), ("d",)), P(), memory_kind="pinned_host")\n'
        "def unsupported(x):\n"
        '    raise NotImplementedError("not on this backend")\n'
        "@jax.jit\n"
        "def step(x):\n"
        "    return unsupported(jax.device_put(x, HOST))\n"
    )
    for version in VERSIONS:
        assert check_source(source, "step.py", jax_version=version).diagnostics == ()
