"""The choice among candidate plans: a plan that fails its check (it does not lower, the
compiler rejects it, the analysis of the fixed lowering still finds what it claims) is replaced
by the next candidate of its root cause, with ``rank`` (the compiler installed) the one of
fewest device bytes among those placing the outputs alike, and a root cause with no valid
candidate says why in one line."""

from types import SimpleNamespace

from offload_fixer.verify.choice import Trial, choose


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


def test_without_rank_the_first_plan_that_holds_wins_not_the_fewest_bytes():
    """A plan the compiler rejects does not hold (the check says so): the next is tried."""
    plans = [_plan("rejected"), _plan("compiles"), _plan("compiles, fewer bytes")]
    held = {"compiles": 300, "compiles, fewer bytes": 100}

    def check(ps):
        title = ps[-1].title
        if title not in held:
            return Trial(False, "libtpu 0.0.42.1 still rejects the fixed `f`: INTERNAL: boom")
        return Trial(True, compiled=True, device_bytes=held[title])

    choice = choose([plans], check)
    assert [p.title for p in choice.plans] == ["compiles"]
    assert choice.trial.device_bytes == 300
    assert choice.replaced[0][2] == "libtpu 0.0.42.1 still rejects the fixed `f`: INTERNAL: boom"


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
    choice = choose([plans], _ranked_check(figures), rank=True)
    assert [p.title for p in choice.plans] == ["whole"]
    assert choice.trial.device_bytes == 340
    assert [[(p.title, n) for p, n in compared] for compared in choice.ranked] == [
        [("whole", 340), ("slice by slice", 500)]
    ]
    assert choice.replaced == ((plans[0], plans[1], "fewer device bytes: 340 B against 500 B"),)
    # the same figures the other way round: the first candidate is kept
    figures["whole"] = (True, 600, host)
    kept = choose([plans], _ranked_check(figures), rank=True)
    assert [p.title for p in kept.plans] == ["slice by slice"] and kept.replaced == ()
    # without rank, the first that compiles, whatever it holds
    assert [p.title for p in choose([plans], _ranked_check(figures)).plans] == ["slice by slice"]


def test_rank_compiles_a_bounded_number_of_candidates_and_skips_those_that_fail():
    plans = [_plan(f"plan {i}") for i in range(6)]
    host = (("pinned_host",),)
    figures = {f"plan {i}": (True, 100 - i, host) for i in range(6)}
    figures["plan 0"] = (False, None, None)
    checked = []

    def check(ps):
        checked.append(ps[-1].title)
        return _ranked_check(figures)(ps)

    choice = choose([plans], check, rank=True)
    assert checked == ["plan 0", "plan 1", "plan 2"]  # RANKED candidates, not all six
    assert [p.title for p in choice.plans] == ["plan 2"]
    assert choice.replaced[0][2] == "rejected"
    # none of the first RANKED holds: the rest are still tried
    for i in range(4):
        figures[f"plan {i}"] = (False, None, None)
    checked.clear()
    late = choose([plans], check, rank=True)
    assert [p.title for p in late.plans] == ["plan 4"] and checked == [f"plan {i}" for i in range(5)]
