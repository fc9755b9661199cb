"""The JAX-API table: every modelled callable has one entry, and each of its roles (called,
used as a decorator, given to ``functools.partial``) does what JAX does, seen from source."""

from __future__ import annotations

import pytest

from offload_fixer.static import jax_api, names
from offload_fixer.static.values import UNKNOWN, Const, ShardingSpec

from .helpers import LEGACY, TYPED, found, host_compute

CALLABLES = (
    names.JIT
    | names.PARTIAL
    | names.DEVICE_PUT
    | names.SHARDING_CLASSES
    | names.DEVICE_LISTS
    | names.VMAP
    | names.SHARD_MAP
    | names.CHECKPOINT
    | names.CUSTOM_JVP
    | names.COMPUTE_ON
    | names.COMPUTE_ON_FUNCTION
    | names.GRAD
    | names.VALUE_AND_GRAD
    | names.OPTAX_WITH_STATE
    | names.NNX_SPLIT
    | names.NNX_STATE
    | names.NNX_MERGE
    | names.DATACLASS_REPLACE
    | names.TREE_MAP
    | names.COPIES
    | names.COMPUTE_FUNCTIONS
    | set(names.PYTREE_PRESERVING)
    | {
        names.STATICMETHOD,
        names.OPTAX_SGD,
        names.OPTAX_CHAIN,
        names.OPTAX_APPLY_UPDATES,
        names.LAX_SCAN,
        names.LAX_MAP,
        names.LAX_FORI,
        names.LAX_WHILE,
        names.LAX_COND,
        names.LAX_SWITCH,
    }
)
TRANSFORMS = names.JIT | names.VMAP | names.SHARD_MAP | names.CHECKPOINT | names.CUSTOM_JVP | names.CUSTOM_VJP
DECORATOR_FACTORIES = TRANSFORMS | names.COMPUTE_ON | names.COMPUTE_ON_FUNCTION
"""``functools.partial(compute_on, compute_type=..., out_memory_spaces=...)`` decorates too."""


def test_every_callable_the_names_list_has_an_entry():
    assert sorted(CALLABLES - set(jax_api.APIS)) == []


def test_only_jit_and_the_transforms_make_decorator_factories():
    factories = {name for name, api in jax_api.APIS.items() if api.partial is not None}
    decorators = {name for name, api in jax_api.APIS.items() if api.decorate is not None}
    assert factories == DECORATOR_FACTORIES
    assert decorators == TRANSFORMS | {names.STATICMETHOD}


def test_a_name_outside_the_table_is_unknown_and_transfer_to_memory_kind_is_matched_by_shape():
    assert jax_api.call(None, "jax.numpy.zeros_like", [], {}, None, None) is UNKNOWN
    spec = jax_api.call(None, "jax._src.sharding_impls.TransferToMemoryKind", [Const("pinned_host")], {}, None, None)
    assert spec == ShardingSpec("pinned_host")


INNER = "def inner(v):\n    return jax.device_put(v, host)\n"


@pytest.mark.parametrize(
    "definitions, call, legacy",
    [
        (INNER, "jax.vmap(inner)(x)", True),
        ("@jax.vmap\n" + INNER, "inner(x)", True),
        ("@partial(jax.vmap, in_axes=0)\n" + INNER, "inner(x)", True),
        ("@functools.partial(jax.custom_jvp, nondiff_argnums=())\n" + INNER, "inner(x)", True),
        (
            "from jax.experimental.shard_map import shard_map\n"
            "@partial(shard_map, mesh=mesh, in_specs=P(), out_specs=P())\n" + INNER,
            "inner(x)",
            True,
        ),
        (INNER, "jax.checkpoint(inner)(x)", False),
        ("@jax.checkpoint\n" + INNER, "inner(x)", False),
        ("@jax.remat\n" + INNER, "inner(x)", False),
        ("@partial(jax.checkpoint, policy=jax.checkpoint_policies.nothing_saveable)\n" + INNER, "inner(x)", False),
    ],
    ids=[
        "vmap-called",
        "vmap-decorator",
        "vmap-partial",
        "custom-jvp-partial",
        "shard-map-partial",
        "checkpoint-called",
        "checkpoint-decorator",
        "remat-decorator",
        "checkpoint-partial",
    ],
)
def test_transform_roles(definitions, call, legacy):
    """vmap, shard_map and custom_jvp trace the function and keep its host result (an error
    where JAX never infers output kinds); checkpoint's rematerialised outputs are not told."""
    body = f"""
{definitions}
@jax.jit
def f(x):
    return {call}
"""
    assert found(body, LEGACY) == ([("OFL1200", "")] if legacy else [])
    assert found(body, TYPED) == []


COMPUTE_ON = "from jax.experimental.compute_on import compute_on\n"
HOST_OUT = 'compute_type="device_host", out_memory_spaces=jax.memory.Space.Host'
BLEND = "def blend(e, p):\n    return 0.9 * e + 0.1 * p\n"


@pytest.mark.parametrize(
    "definitions",
    [
        COMPUTE_ON + BLEND + f"blend_on_host = compute_on(blend, {HOST_OUT})\n",
        COMPUTE_ON + f"@compute_on({HOST_OUT})\n" + BLEND.replace("blend", "blend_on_host", 1),
        COMPUTE_ON + f"@partial(compute_on, {HOST_OUT})\n" + BLEND.replace("blend", "blend_on_host", 1),
        "from jax.experimental.compute_on import compute_on2\n"
        + BLEND
        + f"blend_on_host = compute_on2(blend, {HOST_OUT})\n",
        "from jax.experimental import compute_on as api\n"
        'host_compute = getattr(api, "compute_on2", api.compute_on)\n'
        + BLEND
        + f"blend_on_host = host_compute(blend, {HOST_OUT})\n",
    ],
    ids=["called", "decorator", "partial", "compute_on2", "getattr-either"],
)
def test_compute_on_function_form_computes_on_host_and_puts_outputs_where_declared(definitions):
    """The body of a function under compute_on's function form is host compute the program
    asks for (no OFL1201 in it, on its host inputs); its output is a new host value when
    ``out_memory_spaces`` says host, so computing on it after the call is OFL1201 (as ``run``
    reports: tests/static_vs_dynamic/compute_on_*.py), and returning it is a host output."""
    body = f"""
{definitions}
@jax.jit
def step(w, ema):
    ema = blend_on_host(ema, jax.device_put(w, host))
    return w, ema, ema * 2
"""
    lines = body.count("\n")
    assert host_compute(body) == [(lines, "multiply")]
    assert found(body, TYPED) == []
    device_out = body.replace("Space.Host", "Space.Device")
    assert host_compute(device_out) == []


def test_compute_on_function_form_places_each_output_by_its_memory_space():
    body = f"""
{COMPUTE_ON}
@compute_on(compute_type="device_host", out_memory_spaces=(jax.memory.Space.Host, jax.memory.Space.Device))
def refresh(buffer, rewards):
    buffer = jnp.concatenate([buffer, rewards])
    return buffer, jnp.mean(buffer)


@jax.jit
def step(buffer, rewards):
    buffer, mean = refresh(buffer, jax.device_put(rewards, host))
    return buffer, mean * 2, buffer + 1
"""
    assert host_compute(body) == [(body.count("\n"), "add")]


@pytest.mark.parametrize("compute_type", ["device", "tpu_sparsecore"])
def test_compute_on_for_another_compute_type_is_not_host_compute(compute_type):
    body = f"""
{COMPUTE_ON}
@jax.jit
def step(w):
    h = jax.device_put(w, host)
    out = compute_on(lambda v: v * 2, compute_type="{compute_type}", out_memory_spaces=jax.memory.Space.Host)(h)
    return out * 2
"""
    assert host_compute(body) == []
