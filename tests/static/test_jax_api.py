"""The JAX-API table: every modelled callable has one entry, and each of its roles (called,
used as a decorator, given to ``functools.partial``) does what JAX does, seen from source."""

from __future__ import annotations

import pytest

from offload_fixer.static import jax_api, names
from offload_fixer.static.values import UNKNOWN, Const, ShardingSpec

from .helpers import LEGACY, TYPED, found

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
DECORATOR_FACTORIES = names.JIT | names.VMAP | names.SHARD_MAP | names.CHECKPOINT | names.CUSTOM_JVP | names.CUSTOM_VJP


def test_every_callable_the_names_list_has_an_entry():
    assert sorted(CALLABLES - set(jax_api.APIS)) == []


def test_only_jit_and_the_transforms_make_decorator_factories():
    factories = {name for name, api in jax_api.APIS.items() if api.partial is not None}
    decorators = {name for name, api in jax_api.APIS.items() if api.decorate is not None}
    assert factories == DECORATOR_FACTORIES
    assert decorators == DECORATOR_FACTORIES | {names.STATICMETHOD}


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
