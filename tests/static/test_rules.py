"""The trigger catalogue of docs/jax-versions.md, one test per row visible in source, with the
verdict asserted for each regime (<=0.4.28 / 0.4.29-0.7.0 / >=0.7.1)."""

from __future__ import annotations

import pytest

from offload_fixer.jax_compat import spelling
from offload_fixer.static.rules import is_error
from offload_fixer.static.values import HostArray, HostOrigin

from .helpers import LEGACY, PROPAGATION, TYPED, found, verdicts

OK: list = []


def error(path: str = "", code: str = "OFL1200") -> list:
    return [(code, path)]


def test_return_device_put_to_host():
    body = """
    @jax.jit
    def f(x):
        return jax.device_put(x, host)
    """
    assert verdicts(body) == (error(), OK, OK)


def test_a_move_to_host_returned_as_the_whole_single_output_is_repaired():
    """XLA replaces such a move with a copy to host, and the released compilers compile it
    under every JAX; ``x`` alone could be a pytree of several outputs, ``x * 2`` is one array."""
    body = """
    @jax.jit
    def f(x):
        return jax.device_put(x * 2, host)
    """
    assert verdicts(body) == (OK, OK, OK)
    unpinned = body.replace("host)", "unpinned)")
    assert verdicts(unpinned) == ([("OFL1204", None)], OK, [("OFL1204", None)])
    several = body.replace("return jax.device_put(x * 2, host)", "return jax.device_put(x * 2, host), x")
    assert verdicts(several) == (error("[0]"), OK, OK)


@pytest.mark.parametrize(
    "expression",
    [
        "h * 2",
        "h + 0",
        "jnp.sin(h)",
        "-h",
        "h @ h",
        "h[0]",
        "h[:, 1:]",
        "h.sum()",
        "jnp.maximum(h, 0.0)",
        "h.at[0].set(1.0)",
        "jnp.concatenate([h, h])",
        "jnp.stack([h])",
        "jax.nn.relu(h)",
        "h > 0",
    ],
)
def test_host_value_then_compute_returned(expression):
    body = f"""
    @jax.jit
    def f(x):
        h = jax.device_put(x, host)
        return {expression}
    """
    assert verdicts(body) == (error(), error(), OK)


@pytest.mark.parametrize(
    "expression",
    [
        "h.reshape(-1)",
        "jnp.reshape(h, (-1,))",
        "h.T",
        "jnp.transpose(h)",
        "h.astype(jnp.bfloat16)",
        "lax.convert_element_type(h, jnp.bfloat16)",
        "jnp.float32(h)",
        "h[:]",
        "h[...]",
        "+h",
        "h.real",
        "jnp.squeeze(h)",
        "jnp.concatenate([h])",
        "jnp.floor(h)",
    ],
)
def test_reshape_transpose_astype_may_keep_the_kind(expression):
    # JAX 0.4.29-0.7.0 returns the operand itself when these change nothing (same shape or
    # dtype, a vector's .T, x[:]), keeping its kind: without shapes the check cannot decide.
    body = f"""
    @jax.jit
    def f(x):
        h = jax.device_put(x, host)
        return {expression}
    """
    assert verdicts(body) == (error(), OK, OK)
    assert verdicts(body.replace("return ", "return 2 * ")) == (error(), error(), OK)


def test_tuple_or_dict_containing_host_value():
    tuple_body = """
    @jax.jit
    def f(x):
        return jax.device_put(x, host), x
    """
    dict_body = """
    @jax.jit
    def f(x):
        return {"params": x, "opt": jax.device_put(x, host)}
    """
    assert verdicts(tuple_body) == (error("[0]"), OK, OK)
    assert verdicts(dict_body) == (error("['opt']"), OK, OK)


@pytest.mark.parametrize("out", ["(host, dev)", "(dev, dev)", "(host, host)", "host", "dev"])
def test_out_shardings_with_an_explicit_kind_on_every_output(out):
    body = f"""
    @partial(jax.jit, out_shardings={out})
    def f(x):
        h = jax.device_put(x, host)
        return h * 2, h
    """
    assert verdicts(body) == (OK, OK, OK)


def test_out_shardings_none_leaf_over_a_host_value():
    body = """
    @partial(jax.jit, out_shardings=(None, dev))
    def f(x):
        return jax.device_put(x, host), x
    """
    assert verdicts(body) == (error("[0]"), OK, OK)


@pytest.mark.parametrize(
    "ys",
    [
        "lax.scan(lambda c, y: (c, jax.device_put(y, host)), 0.0, x)[1]",
        "lax.map(lambda y: jax.device_put(y, host), x)",
        "jax.vmap(lambda y: jax.device_put(y, host))(x)",
    ],
)
def test_scan_map_vmap_putting_ys_to_host(ys):
    body = f"""
    @jax.jit
    def f(x):
        return {ys}
    """
    assert verdicts(body) == (error(), OK, OK)


def test_ys_computed_after_the_move_lose_the_kind():
    body = """
    @jax.jit
    def f(x):
        def step(c, y):
            return c, jax.device_put(y, host) * 2
        _, ys = lax.scan(step, 0.0, x)
        return ys
    """
    assert verdicts(body) == (error(), error(), OK)


@pytest.mark.parametrize(
    "loop",
    [
        "lax.scan(lambda c, _: (c, None), h, None, length=3)[0]",
        "lax.while_loop(lambda c: False, lambda c: c, h)",
        "lax.fori_loop(0, 3, lambda i, c: c, h)",
    ],
)
def test_loop_carry_that_is_an_unchanged_host_value(loop):
    # 0.4.29-0.7.0 differ among themselves (E in 0.4.35, ok in 0.6.2): the check stays silent.
    body = f"""
    @jax.jit
    def f(x):
        h = jax.device_put(x, host)
        return {loop}
    """
    assert verdicts(body) == (error(), OK, OK)


def test_cond_with_both_branches_host():
    body = """
    @jax.jit
    def f(p, x):
        return lax.cond(p, lambda v: jax.device_put(v, host), lambda v: jax.device_put(v * 2, host), x)
    """
    assert verdicts(body) == (error(), error(), OK)


@pytest.mark.parametrize(
    "definitions, call",
    [
        ("@jax.jit\ndef inner(v):\n    return jax.device_put(v, host)\n", "inner(x)"),
        ("@jax.custom_jvp\ndef inner(v):\n    return jax.device_put(v, host)\n", "inner(x)"),
        ("", "lax.stop_gradient(jax.device_put(x, host))"),
        ("", "lax.optimization_barrier(jax.device_put(x, host))"),
        (
            "from jax.experimental.shard_map import shard_map\ndef inner(v):\n    return jax.device_put(v, host)\n",
            "shard_map(inner, mesh=mesh, in_specs=P(), out_specs=P())(x)",
        ),
    ],
    ids=["nested-jit", "custom-jvp", "stop-gradient", "optimization-barrier", "shard-map"],
)
def test_call_boundaries_returning_host(definitions, call):
    body = f"""
{definitions}
@jax.jit
def f(x):
    return {call}
"""
    result = verdicts(body)
    if definitions.startswith("@jax.jit"):
        # ``inner`` is itself a jitted function returning device_put to host (row 1).
        assert result == (error() * 2, error(), OK)
    else:
        assert result == (error(), error(), OK)


def test_grad_with_an_offload_policy_is_fine():
    body = """
    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["h"],
        offload_src="device", offload_dst="pinned_host")

    def loss(w, x):
        h = jax.ad_checkpoint.checkpoint_name(jnp.sin(w * x), "h")
        return jnp.sum(h * h)

    @jax.jit
    def step(w, x):
        return jax.grad(jax.checkpoint(loss, policy=policy))(w, x)
    """
    assert verdicts(body) == (OK, OK, OK)


def test_host_input_into_compute_on_device_host():
    body = """
    from jax.experimental.compute_on import compute_on

    @jax.jit
    def f(x):
        h = jax.device_put(x, host)
        with compute_on("device_host"):
            y = h * 2
        return y
    """
    assert found(body, PROPAGATION) == error()
    assert found(body, TYPED) == OK


@pytest.mark.parametrize("donate", ["", ", donate_argnums=0"])
def test_host_in_shardings_then_compute_is_an_error_in_every_version(donate):
    body = f"""
    def f(x):
        return x * 2
    g = jax.jit(f, in_shardings=host{donate})
    """
    assert verdicts(body) == (error(), error(), error())


def test_host_in_shardings_returned_unchanged():
    body = """
    @partial(jax.jit, in_shardings=(host, None))
    def f(x, y):
        return x, y
    """
    assert verdicts(body) == (error("[0]"), OK, error("[0]"))


@pytest.mark.parametrize("out", ["host", "dev", "(dev,)"])
def test_host_in_shardings_with_explicit_out_shardings(out):
    body = f"""
    @partial(jax.jit, in_shardings=(host,), out_shardings={out})
    def f(x):
        return x * 2
    """
    assert verdicts(body) == (OK, OK, OK)


@pytest.mark.parametrize("move", ["jax.device_put(x, dev)", "jax.device_put(x, host.with_memory_kind('device'))"])
def test_host_input_moved_to_device_before_compute(move):
    body = f"""
    @partial(jax.jit, in_shardings=host)
    def f(x):
        y = {move}
        return y * 2
    """
    assert verdicts(body) == (OK, OK, OK)


@pytest.mark.parametrize(
    ("sharding", "kept_on_device"),
    [
        ('NamedSharding(jax.sharding.Mesh(jax.devices(), ("x",)), P(), memory_kind="unpinned_host")', False),
        (
            'NamedSharding(jax.make_mesh((1,), ("x",), axis_types=(AxisType.Auto,)), P(), memory_kind="unpinned_host")',
            False,
        ),
        ('SingleDeviceSharding(jax.devices()[0], memory_kind="unpinned_host")', False),
        ('NamedSharding(jax.make_mesh((1,), ("x",)), P(), memory_kind="unpinned_host")', True),
        ('NamedSharding(jax.make_mesh((1,), ("x",), (AxisType.Explicit,)), P(), memory_kind="unpinned_host")', True),
        (
            'NamedSharding(jax.sharding.Mesh(jax.devices(), ("x",), axis_types=(AxisType.Explicit,)), P()).with_memory_kind("unpinned_host")',
            True,
        ),
    ],
)
def test_device_put_to_unpinned_host_returned(sharding, kept_on_device):
    # As the dynamic analysis does: OFL1200 for the output, OFL1204 for the move itself; from
    # JAX 0.7.2 a move over a mesh whose axes are Explicit (jax.make_mesh's default from 0.9)
    # is returned in device memory, which the released compilers compile: OFL1204 alone.
    body = f"""
    from jax.sharding import AxisType

    kept = {sharding}

    @jax.jit
    def f(x):
        return jax.device_put(x, kept)
    """
    both = error() + [("OFL1204", None)]
    assert verdicts(body) == (both, OK, [("OFL1204", None)] if kept_on_device else both)


@pytest.mark.parametrize(("version", "make_mesh_axes"), [("0.8.3", "Auto"), ("0.9.0", "Explicit")])
def test_make_mesh_axes_are_explicit_from_jax_0_9(version, make_mesh_axes):
    body = """
    kept = NamedSharding(jax.make_mesh((1,), ("x",)), P(), memory_kind="unpinned_host")

    @jax.jit
    def f(x):
        return x + 1, jax.device_put(x * 2, kept)
    """
    expected = [("OFL1204", None)] if make_mesh_axes == "Explicit" else error("[1]") + [("OFL1204", None)]
    assert found(body, version) == expected


@pytest.mark.parametrize("put", ["jax.device_put(h, jax.devices()[0])", "jax.device_put(h)"])
def test_device_put_without_a_memory_kind_is_not_a_move_back(put):
    body = f"""
    @jax.jit
    def f(x):
        h = jax.device_put(x, host)
        return {put}
    """
    assert verdicts(body) == (error(), error(), OK)


def test_copies_keep_the_kind_where_jax_propagates_it():
    body = """
    @jax.jit
    def f(x):
        return jnp.copy(jax.device_put(x, host))
    """
    assert verdicts(body) == (error(), OK, OK)


@pytest.mark.parametrize(
    "origin, memory_kind, steps, expected",
    [
        ("move_to_host", "pinned_host", set(), (True, False, False)),
        ("move_to_host", "pinned_host", {"compute"}, (True, True, False)),
        ("move_to_host", "pinned_host", {"carry"}, (True, None, False)),
        ("move_to_host", "pinned_host", {"maybe_identity"}, (True, None, False)),
        ("move_to_host", "pinned_host", {"maybe_identity", "compute"}, (True, True, False)),
        ("move_to_host", "pinned_host", {"carry", "compute"}, (True, True, False)),
        ("move_to_host", "pinned_host", {"cond_mixed"}, (True, True, None)),
        ("move_to_host", "unpinned_host", set(), (True, False, True)),
        ("host_argument", "pinned_host", set(), (True, False, True)),
        ("host_argument", "pinned_host", {"noop_put"}, (True, True, True)),
    ],
)
def test_regime_table(origin, memory_kind, steps, expected):
    leaf = HostArray(HostOrigin(origin, memory_kind, None, ""), frozenset(steps))
    assert tuple(is_error(leaf, spelling(v)) for v in (LEGACY, PROPAGATION, TYPED)) == expected


def test_unpinned_host_was_the_host_kind_before_0_4_25():
    leaf = HostArray(HostOrigin("move_to_host", "unpinned_host", None, ""))
    assert is_error(leaf, spelling("0.4.20")) is True
    body = """
    @jax.jit
    def f(x):
        return jax.device_put(x, unpinned)
    """
    assert found(body, "0.4.20") == error()
