"""Editor settings of the wrong type are left out and named, never a failed ``initialize``."""

from __future__ import annotations

import pytest

from offload_fixer.lsp.settings import ClientOptions, SettingsStore


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
