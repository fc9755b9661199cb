"""Rows: ``vjp``/``linearize`` of a checkpoint-offload function returning residuals, and a
``custom_vjp`` forward pass returning host residuals -> E / ok / ok; ``grad`` with an offload
policy (residuals consumed inside) -> ok everywhere."""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from catalogue import OK, Case, E, to_device, to_host, vector

RESIDUALS_RETURNED = {"LEGACY": E, "PROPAGATION": OK, "TYPED": OK}
RESIDUAL_SHAPE = (8, 3)


def _is_residual(leaf):
    return tuple(leaf.shape) == RESIDUAL_SHAPE


def _loss(x):
    w = checkpoint_name(jnp.sin(x)[:, None] * jnp.ones((1, 3)), "w")  # origin
    return jnp.sum(jnp.cos(w))


_OFFLOAD_W = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[],
    names_which_can_be_offloaded=["w"],
    offload_src="device",
    offload_dst="pinned_host",
)
_offloading_loss = jax.checkpoint(_loss, policy=_OFFLOAD_W)


def vjp_returns_residuals(x):
    return jax.vjp(_offloading_loss, x)  # origin


def linearize_returns_residuals(x):
    return jax.linearize(_offloading_loss, x)  # origin


def vjp_residuals_negated(x):
    loss, pullback = jax.vjp(_offloading_loss, x)  # origin
    return loss, jax.tree_util.tree_map(jnp.negative, pullback)


def grad_consumes_residuals(x):
    return jax.grad(_offloading_loss)(x)


def _sin_fwd(x):
    return jnp.sin(x), jax.device_put(jnp.stack([x, x, x], axis=1), to_host())  # origin


def _sin_bwd(residual, cotangent):
    x = jax.device_put(residual, to_device())[:, 0]
    return (cotangent * jnp.cos(x),)


_sin = jax.custom_vjp(lambda x: jnp.sin(x))
_sin.defvjp(_sin_fwd, _sin_bwd)


def custom_vjp_returns_residuals(x):
    return jax.vjp(_sin, x)


CASES = [
    Case(
        "vjp_of_offload_policy_returns_residuals",
        vjp_returns_residuals,
        vector,
        RESIDUALS_RETURNED,
        None,
        output_leaf=_is_residual,
        origin_kind="offload_policy",
        origin_in=(_loss, vjp_returns_residuals),
    ),
    Case(
        "linearize_of_offload_policy_returns_residuals",
        linearize_returns_residuals,
        vector,
        RESIDUALS_RETURNED,
        None,
        output_leaf=_is_residual,
        origin_kind="offload_policy",
        origin_in=(_loss, linearize_returns_residuals),
    ),
    # Not a catalogue row: residuals offloaded by the policy, then computed on before they are
    # returned, so the kind is lost wherever elementwise ops lose it (E / E / ok).
    Case(
        "vjp_of_offload_policy_residuals_negated",
        vjp_residuals_negated,
        vector,
        {"LEGACY": E, "PROPAGATION": E, "TYPED": OK},
        None,
        output_leaf=_is_residual,
        origin_kind="offload_policy",
        origin_in=(_loss, vjp_residuals_negated),
    ),
    Case(
        "custom_vjp_fwd_returns_host_residuals",
        custom_vjp_returns_residuals,
        vector,
        RESIDUALS_RETURNED,
        None,
        output_leaf=_is_residual,
        origin_in=_sin_fwd,
    ),
    Case("grad_with_offload_policy", grad_consumes_residuals, vector, {"LEGACY": OK, "PROPAGATION": OK, "TYPED": OK}),
]
