"""Candidate plans: the scan-body move sees through ``jax.grad(f)(stack, x)`` and its wider
plan moves the stack whole, an update of the stack the function returns to host memory
(``stack - 0.1 * grads``) leaves it host, and an argument read once as a slice moves only that
slice, its wider plan the whole argument."""

import libcst as cst
from libcst.codemod import CodemodContext

from offload_fixer.codemods.move_to_device import MoveToDeviceCommand, MoveToDeviceTarget

GRAD_OF_SCAN = """import jax
import jax.numpy as jnp


def loss_fn(layers, x):
    def layer(h, w):
        return jnp.tanh(h @ w), None

    h, _ = jax.lax.scan(layer, x, layers)
    return jnp.mean(h**2)


def grad_norm(layers, x):
    grads = jax.grad(loss_fn)(layers, x)
    return jnp.sqrt(jnp.sum(grads**2))
"""


def _move(narrow: bool) -> str:
    target = MoveToDeviceTarget(
        function_name="grad_norm", function_line=13, placement="entry", parameter="layers", narrow=narrow
    )
    command = MoveToDeviceCommand(CodemodContext(filename="m.py"), targets=[target])
    return command.transform_module(cst.parse_module(GRAD_OF_SCAN)).code


def test_a_stack_scanned_under_grad_moves_slice_by_slice_and_its_wider_plan_whole():
    narrow, wide = _move(True), _move(False)
    assert "    def layer(h, w):\n        w = jax.device_put(w, jax.memory.Space.Device)\n" in narrow
    assert "layers = jax.device_put" not in narrow
    assert "    layers = jax.device_put(layers, jax.memory.Space.Device)\n    grads = jax.grad" in wide
    assert "w = jax.device_put" not in wide


SGD_OF_SCAN = GRAD_OF_SCAN.replace(
    """def grad_norm(layers, x):
    grads = jax.grad(loss_fn)(layers, x)
    return jnp.sqrt(jnp.sum(grads**2))
""",
    """def sgd(layers, x):
    loss, grads = jax.value_and_grad(loss_fn)(layers, x)
    return layers - 0.1 * grads, loss
""",
)


def _move_sgd(text: str, narrow: bool) -> tuple[str, list[str]]:
    target = MoveToDeviceTarget(
        function_name="sgd", function_line=13, placement="entry", parameter="layers", narrow=narrow
    )
    command = MoveToDeviceCommand(CodemodContext(filename="m.py"), targets=[target])
    code = command.transform_module(cst.parse_module(text)).code
    return code, [e.description for e in command.outcome.edits]


def test_a_stack_updated_in_host_memory_still_moves_slice_by_slice_and_says_the_update_stays_host():
    narrow, said = _move_sgd(SGD_OF_SCAN, True)
    assert "    def layer(h, w):\n        w = jax.device_put(w, jax.memory.Space.Device)\n" in narrow
    assert "layers = jax.device_put" not in narrow
    assert any("its arithmetic on line 15 stays in host memory (host compute)" in d for d in said), said
    # the planner reads which lines keep host compute, so the plan does not claim their OFL1201
    target = MoveToDeviceTarget(function_name="sgd", function_line=13, placement="entry", parameter="layers")
    command = MoveToDeviceCommand(CodemodContext(filename="m.py"), targets=[target])
    command.transform_module(cst.parse_module(SGD_OF_SCAN))
    assert [e.host_compute_kept for e in command.outcome.edits] == [(15,)]
    wide, _ = _move_sgd(SGD_OF_SCAN, False)
    assert "    layers = jax.device_put(layers, jax.memory.Space.Device)\n    loss, grads =" in wide


def test_a_stack_read_otherwise_than_by_arithmetic_or_a_scan_moves_whole():
    text = SGD_OF_SCAN.replace("return layers - 0.1 * grads, loss", "return jnp.sum(layers), loss")
    narrow, _ = _move_sgd(text, True)
    assert "    layers = jax.device_put(layers, jax.memory.Space.Device)\n" in narrow
    assert "w = jax.device_put" not in narrow


ROUTE = """import jax
import jax.numpy as jnp


def route(router, experts, x):
    choice = jnp.argmax(jnp.mean(x @ router, axis=0))
    expert = jax.lax.dynamic_index_in_dim(experts, choice, keepdims=False)
    return x @ expert
"""


def _move_experts(text: str, narrow: bool) -> tuple[str, MoveToDeviceCommand]:
    target = MoveToDeviceTarget(
        function_name="route", function_line=5, placement="entry", parameter="experts", narrow=narrow
    )
    command = MoveToDeviceCommand(CodemodContext(filename="m.py"), targets=[target])
    return command.transform_module(cst.parse_module(text)).code, command


def test_a_host_argument_read_once_as_a_slice_moves_only_that_slice_and_its_wider_plan_whole():
    narrow, command = _move_experts(ROUTE, True)
    moved = "jax.device_put(jax.lax.dynamic_index_in_dim(experts, choice, keepdims=False), jax.memory.Space.Device)"
    assert f"    expert = {moved}\n" in narrow
    assert "experts = jax.device_put" not in narrow
    assert [e.subject for e in command.outcome.edits] == ["the slice of experts"]
    again, command = _move_experts(narrow, True)  # a second run changes nothing
    assert again == narrow and command.outcome.satisfied and not command.outcome.edits
    wide, _ = _move_experts(ROUTE, False)
    assert "    experts = jax.device_put(experts, jax.memory.Space.Device)\n    choice =" in wide


def test_a_slice_read_beside_other_reads_or_by_an_array_index_moves_the_whole_argument():
    whole = "    experts = jax.device_put(experts, jax.memory.Space.Device)\n"
    # metadata is no read: still the one slice
    shaped = ROUTE.replace("return x @ expert", "return (x @ expert) / experts.shape[0]")
    assert "experts = jax.device_put" not in _move_experts(shaped, True)[0]
    twice = ROUTE.replace("return x @ expert", "return x @ expert + jnp.sum(experts)")
    assert whole in _move_experts(twice, True)[0]
    gathered = ROUTE.replace("jax.lax.dynamic_index_in_dim(experts, choice, keepdims=False)", "experts[choice]")
    assert whole in _move_experts(gathered, True)[0]
    first = ROUTE.replace("jax.lax.dynamic_index_in_dim(experts, choice, keepdims=False)", "experts[0]")
    assert "    expert = jax.device_put(experts[0], jax.memory.Space.Device)\n" in _move_experts(first, True)[0]
