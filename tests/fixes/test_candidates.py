"""Candidate plans: a plan that fails its check is replaced by the next candidate of its root
cause, with the compiler the first candidate that compiles is chosen, with ``rank``
(``--confirm``) the one of fewest device bytes among those placing the outputs alike, and a
root cause with no valid candidate says why in one line. The scan-body move sees through
``jax.grad(f)(stack, x)``, and an update of the stack the function returns to host memory
(``stack - 0.1 * grads``) leaves it host."""

from types import SimpleNamespace

import libcst as cst
from libcst.codemod import CodemodContext

from offload_fixer.codemods.move_to_device import MoveToDeviceCommand, MoveToDeviceTarget
from offload_fixer.fixes.candidates import Trial, choose

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


def _plan(title):
    return SimpleNamespace(title=title)


def test_a_plan_that_fails_is_replaced_by_the_next_candidate_and_says_why():
    first, second = _plan("narrow move"), _plan("whole move")
    checked = []

    def check(plans):
        checked.append([p.title for p in plans])
        if first in plans:
            return Trial(False, "the fixed `f` no longer lowers: TypeError: boom")
        return Trial(True, compiled=True, device_bytes=10)

    choice = choose([[first, second]], check)
    assert choice.plans == (second,)
    assert choice.replaced == ((first, second, "the fixed `f` no longer lowers: TypeError: boom"),)
    assert checked == [["narrow move"], ["narrow move"], ["whole move"]]


def test_with_the_compiler_the_first_plan_that_compiles_wins_not_the_fewest_bytes():
    plans = [_plan("lowers only"), _plan("compiles"), _plan("compiles, fewer bytes")]
    compiled = {"lowers only": (False, None), "compiles": (True, 300), "compiles, fewer bytes": (True, 100)}
    choice = choose([plans], lambda ps: Trial(True, "", *compiled[ps[-1].title]), measure=True)
    assert [p.title for p in choice.plans] == ["compiles"]
    assert choice.trial.device_bytes == 300
    assert choice.replaced[0][2] == "the first lowers but does not compile"


def test_a_root_cause_no_candidate_fixes_is_left_with_one_line_and_the_others_still_go_through():
    bad, also_bad, good = _plan("host out_shardings"), _plan("move at return"), _plan("other cause")

    def check(plans):
        failing = next((p for p in plans if p in (bad, also_bad)), None)
        return Trial(False, f"{failing.title} rejected") if failing else Trial(True)

    choice = choose([[bad, also_bad], [good]], check)
    assert choice.plans == (good,)
    ((plan, why),) = choice.left
    assert plan is bad and "\n" not in why
    # the first plan's title is the finding's mark: its reason is said once, without it
    assert why == (
        "none of the 2 candidate plans for this root cause is valid: host out_shardings rejected; "
        "move at return: move at return rejected"
    )
    single = choose([[bad]], check)
    assert single.left[0][1] == "host out_shardings rejected; no other candidate plan for this root cause"


def _ranked_check(figures):
    """A check of the last plan: (compiled, device bytes, placement) from ``figures``."""

    def check(plans):
        compiled, held, placement = figures[plans[-1].title]
        if held is None:
            return Trial(False, "rejected")
        return Trial(True, compiled=compiled, device_bytes=held, placement=placement)

    return check


def test_with_rank_the_fewest_bytes_win_among_plans_that_place_the_outputs_alike():
    host, device = (("pinned_host", "device"),), (("device", "device"),)
    plans = [_plan("slice by slice"), _plan("whole"), _plan("state returned in device memory")]
    figures = {
        "slice by slice": (True, 500, host),
        "whole": (True, 340, host),
        "state returned in device memory": (True, 100, device),  # fewest, but undoes the offload
    }
    choice = choose([plans], _ranked_check(figures), measure=True, rank=True)
    assert [p.title for p in choice.plans] == ["whole"]
    assert choice.trial.device_bytes == 340
    assert [[(p.title, n) for p, n in compared] for compared in choice.ranked] == [
        [("whole", 340), ("slice by slice", 500)]
    ]
    assert choice.replaced == ((plans[0], plans[1], "fewer device bytes: 340 B against 500 B"),)
    # the same figures the other way round: the first candidate is kept
    figures["whole"] = (True, 600, host)
    kept = choose([plans], _ranked_check(figures), measure=True, rank=True)
    assert [p.title for p in kept.plans] == ["slice by slice"] and kept.replaced == ()
    # without rank, the first that compiles, whatever it holds
    assert [p.title for p in choose([plans], _ranked_check(figures), measure=True).plans] == ["slice by slice"]


def test_rank_compiles_a_bounded_number_of_candidates_and_skips_those_that_fail():
    plans = [_plan(f"plan {i}") for i in range(6)]
    host = (("pinned_host",),)
    figures = {f"plan {i}": (True, 100 - i, host) for i in range(6)}
    figures["plan 0"] = (False, None, None)
    checked = []

    def check(ps):
        checked.append(ps[-1].title)
        return _ranked_check(figures)(ps)

    choice = choose([plans], check, measure=True, rank=True)
    assert checked == ["plan 0", "plan 1", "plan 2"]  # RANKED candidates, not all six
    assert [p.title for p in choice.plans] == ["plan 2"]
    assert choice.replaced[0][2] == "rejected"
    # none of the first RANKED holds: the rest are still tried
    for i in range(4):
        figures[f"plan {i}"] = (False, None, None)
    checked.clear()
    late = choose([plans], check, measure=True, rank=True)
    assert [p.title for p in late.plans] == ["plan 4"] and checked == [f"plan {i}" for i in range(5)]


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
