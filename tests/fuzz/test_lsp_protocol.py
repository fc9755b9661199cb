"""Every language-server protocol scenario, over stdio with raw bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from .lsp_protocol import SCENARIOS, run_scenario


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_protocol(tmp_path: Path, scenario) -> None:
    problem, _ = run_scenario(scenario, tmp_path)
    assert problem is None, problem
