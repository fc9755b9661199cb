"""Editor settings of the wrong type are left out and named, never a failed ``initialize``."""

from __future__ import annotations

import pytest

from offload_fixer.lsp.settings import ClientOptions, SettingsStore, wait_before


@pytest.mark.parametrize(
    ("raw", "kept", "named"),
    [
        ({"select": 5}, {}, "select"),
        ({"target": 7, "strategy": "host"}, {"strategy": "host"}, "target"),
        ({"ignore": [1, "OFL1201"]}, {}, "ignore"),
        ({"debounceMs": "soon"}, {}, "debounceMs"),
        ({"debounceMs": True}, {}, "debounceMs"),
        ({"offload-fixer": {"jaxVersion": ["0.4.26"]}}, {}, "jaxVersion"),
        ("tpu", {}, "an object"),
        ({"select": "OFL1200", "debounceMs": 10}, {"select": ("OFL1200",), "debounce_ms": 10}, None),
    ],
)
def test_wrong_types_are_dropped_with_a_reason(raw, kept, named):
    options = ClientOptions.parse(raw)
    assert {k: v for k, v in vars(options).items() if v not in (None, ()) and k != "problems"} == kept
    if named is None:
        assert options.problems == ()
    else:
        assert any(named in problem for problem in options.problems), options.problems


def test_the_problems_reach_the_user():
    store = SettingsStore()
    store.set_client(ClientOptions.parse({"select": 5}))
    assert any("editor settings: select" in message for message in store.errors)


@pytest.mark.parametrize(
    ("previous", "now", "idle", "wait"),
    [
        (None, 10.0, False, 0.0),  # the first change
        (9.0, 10.0, False, 0.0),  # a change a debounce after the one before
        (9.99, 10.0, True, 0.0),  # a quick change, but every earlier version's findings are out
        (9.99, 10.0, False, 0.025),  # a burst outpacing the analysis: coalesced
        (9.976, 10.0, False, 0.025),
        (9.975, 10.0, False, 0.0),
    ],
)
def test_the_debounce_waits_only_in_a_burst_that_outpaces_the_analysis(previous, now, idle, wait):
    assert wait_before(previous, now, 0.025, idle) == pytest.approx(wait)
