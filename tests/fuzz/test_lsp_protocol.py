"""Every language-server protocol scenario, over stdio with raw bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from .lsp_protocol import MESSAGES_PER_SERVER, SCENARIOS, deep_messages, run_scenario


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_protocol(tmp_path: Path, scenario) -> None:
    problem, _ = run_scenario(scenario, tmp_path)
    assert problem is None, problem


def test_messages_nested_past_the_limit_are_answered_and_the_server_lives_on(tmp_path: Path) -> None:
    """A seeded sample (``scripts/fuzz.py --deep-messages N`` sends more)."""
    counts, problems = deep_messages(2 * MESSAGES_PER_SERVER, 47, tmp_path)
    assert problems == [], problems
    assert counts["servers"] == 2
